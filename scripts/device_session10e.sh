#!/usr/bin/env bash
# Session 10's fourth H200 call: the lanes' GPU tests after call 3 (whose bit-for-bit checks passed; a wrong extra
# assertion, that the shared expert's site changes the logits, failed at C = 16 / 64 and was removed).
#   run(command="KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session10e.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-150}
source scripts/device_lib.sh || exit 1
step gpu_tests 120 python3 -m pytest -q -p no:cacheprovider -o addopts="" -m gpu tests/test_lanes.py \
    tests/test_decode_bench.py
finish
