#!/usr/bin/env bash
# Session 41, call 4: the GPU tests that call 3's second part did not reach in its 230 s (the NCCL world-1 test was
# running when the limit cut it; the trials test after it).
#   run(command="KB_TOTAL_S=190 KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session41d.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-190}
source scripts/device_lib.sh || exit 1
step gpu_last 175 python3 -m pytest -v -m gpu -p no:cacheprovider -rs --durations=5 tests/test_trials.py \
    tests/test_tp_nccl.py
finish
