#!/usr/bin/env bash
# Session 20, call 5: every GPU-marked test at the session's final kernels (the butterfly default, the packed-key
# top-k, the combine as one join), within what is left of the device budget.
#   run(command="KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session20e.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-170}
source scripts/device_lib.sh || exit 1
step gpu_tests 150 python3 -m pytest -q -p no:cacheprovider -m gpu tests
finish
