#!/usr/bin/env bash
# Session 7's third H200 call (2026-12-02): the profiler's after-effect on later timing, measured in one process
# (call 1 timed C = 16 / 64 after a --profile pass at 9.25 / 14.91 ms; call 2, no profile, 8.56 / 13.86), the step
# with decode-bench's attribution now in a second pass and call 2's fp8_linear C = 64 entries in the packaged file,
# the MoE rows call 1's bench cut, and the GPU tests of decode-bench.
#   run(command="KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session7b.sh", carry=[".whl", ".gpu_peers"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-470}
source scripts/device_lib.sh || exit 1
T="--max-time 0.1 --target-rse 0.03 --max-sets 32 --run-tag session7"
step calibrate 15 $KB calibrate --measure copy_gbps
step after_effect 150 python3 scripts/profiler_after_effect.py --batches 16,64 --rounds 2 --json "$W/after_effect.json"
step decode_flash 130 $KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 1,16,64 \
    --profile --json "$W/decode_flash.json"
step bench_moe 110 $KB bench moe_experts moe_layer --impl triton --impl triton_kernels --shapes flash-tp8 --batch 64 \
    --batch 16 --batch 1 $T --json "$W/bench_moe.json"
step gpu_tests 50 python3 -m pytest -q -p no:cacheprovider -o addopts="" -m gpu tests/test_decode_bench.py
finish
