#!/usr/bin/env bash
# Not run in session 38 (its verify and GPU tests ran in scripts/device_session38d.sh on an H100; the H200 attribution
# and issue 9's table wait for an H200). Written as session 38's first call: GPU verify of the three config paths session 36 could not verify on a device
# (attention_front's PREFETCH "staged", indexer_q's fused path with it, moe_routed's SHARED_SCALES "ahead": verify
# runs every op's covering set of configs), then what scripts/device_session37b.sh holds: the GPU tests of bench --try,
# fp8_linear, the MoE and PDL; the 43-layer step with its attribution at C = 1 / 16 / 64 (issue 17's non-MoE time per
# layer); issue 9's table beside the triton_kernels peer (carry .gpu_peers).
#   run(command="KB_TOTAL_S=560 KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session38a.sh", carry=[".whl", ".gpu_peers"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-560}
source scripts/device_lib.sh || exit 1
step copy 30 $KB calibrate --measure copy_gbps
step verify 140 $KB verify attention_front indexer_q moe_routed --impl triton --device cuda --shapes flash-tp8 \
    --examples 1 --time-budget 3
step gpu_tests 150 python3 -m pytest -q -m gpu tests/test_bench_try.py tests/test_linear.py tests/test_moe.py tests/test_pdl.py
step step_attr 110 $KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 1,16,64 \
    --json "$W/step_attr.json"
step moe_table 130 $KB bench moe_layer moe_experts --impl triton --impl triton_kernels --shapes flash-tp8 \
    --max-time 0.3 --json "$W/moe_table.json"
step_times step_attr
finish
