#!/usr/bin/env bash
# Session 12, call 7: every GPU-marked test on the final tree (the routed (4, 2) split, the compressor entries).
#   run(command="KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session12g.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-250}
source scripts/device_lib.sh || exit 1
step gpu_tests 230 python3 -m pytest -q -p no:cacheprovider -o addopts="" -m gpu tests
finish
