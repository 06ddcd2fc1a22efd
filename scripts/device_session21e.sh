#!/usr/bin/env bash
# Session 21, call 5: the shipped state on the GPU after the lookup's two rules and the three new table entries:
# the GPU tests that run the step's lookups (decode-bench's attribution, fp8_linear's tickets), then the step once.
#   run(command="KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session21e.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-200}
source scripts/device_lib.sh || exit 1
PYT="python3 -m pytest -q -rA -p no:cacheprovider -m gpu"
step gpu_decode 90 $PYT tests/test_decode_bench.py
step gpu_linear 30 $PYT tests/test_linear.py
step final 70 $KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 1,16,64 \
    --json "$W/final.json"
step_times final
finish
