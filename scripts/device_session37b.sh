#!/usr/bin/env bash
# Next session's second call (written in session 36). What session 35 left for session 36's first call, whose script
# (device_session36a.sh) never ran, no device being lent; this one replaces it. The GPU tests of bench --try (a
# repeated trial named, not timed again), of fp8_linear (XQ "once" and PREFETCH "staged" bit-equal to the default,
# racing programs, graph replays) and of the MoE; then the 43-layer step with its attribution at C = 1 / 16 / 64
# (non-MoE time per layer, issue 17) and issue 9's table (moe_layer / moe_experts beside the triton_kernels peer:
# carry .gpu_peers).
#   run(command="KB_TOTAL_S=420 KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session37b.sh", carry=[".whl", ".gpu_peers"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-420}
source scripts/device_lib.sh || exit 1
step copy 30 $KB calibrate --measure copy_gbps
step gpu_tests 120 python3 -m pytest -q -m gpu tests/test_bench_try.py tests/test_linear.py tests/test_moe.py
step step_attr 110 $KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 1,16,64 \
    --json "$W/step_attr.json"
step moe_table 140 $KB bench moe_layer moe_experts --impl triton --impl triton_kernels --shapes flash-tp8 \
    --max-time 0.3 --json "$W/moe_table.json"
finish
