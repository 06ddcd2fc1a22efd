#!/usr/bin/env bash
# Next session's first call (written in session 35). What session 35 could not run on a GPU: bench --try's GPU test
# with a repeated trial (named, stored once), and fp8_linear XQ "once" in the step (call 9's trial was cut by its
# limit), and `kernelbench verify fp8_linear --device cuda` (its XQ "once" path, covered as a categorical option,
# has passed only its GPU test); then the 43-layer step with its attribution at C = 1 / 16 / 64 (non-MoE time per layer, issue 17), and the
# copy ceiling. The card that comes is recorded (environment.txt).
#   run(command="KB_TOTAL_S=420 KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session36a.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-420}
source scripts/device_lib.sh || exit 1
step copy 40 $KB calibrate --measure copy_gbps
step gpu_tests 90 python3 -m pytest -q -m gpu tests/test_bench_try.py tests/test_linear.py
step verify_fp8 70 $KB verify fp8_linear --impl triton --device cuda --shapes flash-tp8 --examples 2 --time-budget 5
step step_attr 120 $KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 1,16,64 \
    --json "$W/step_attr.json"
step trial_xq 120 $KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 16,64 --steps 30 \
    --try 'fp8_linear@M=16,64={"XQ": "once"}' --json "$W/trial_xq.json"
finish
