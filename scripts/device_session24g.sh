#!/usr/bin/env bash
# Session 24, call 7: the GPU tests of --try and --ablate-tuned after the review refactor (one helper pair,
# _setting_runs / _timed_pairs, for the control, the trials and the ablations: capture, eager fallback, release).
#   run(command="KB_TOTAL_S=120 KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session24g.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-120}
source scripts/device_lib.sh || exit 1
step gpu_tests 100 python3 -m pytest -q -rA -p no:cacheprovider -m gpu tests/test_trials.py tests/test_decode_bench.py \
    -k "try or ablate"
finish
