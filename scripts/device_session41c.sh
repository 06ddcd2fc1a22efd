#!/usr/bin/env bash
# Session 41, call 3: the whole GPU test suite in two parts, each test named with its duration (call 2 ran it as one
# quiet step: 62 passed and no failure in 260 s, then the step's limit cut it, with no name for the test it was in).
#   run(command="KB_TOTAL_S=540 KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session41c.sh",
#       carry=[".whl", ".gpu_peers"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-540}
source scripts/device_lib.sh || exit 1
P="python3 -m pytest -v -m gpu -p no:cacheprovider -rs --durations=25"
step gpu_moe 300 $P tests/test_moe.py tests/test_indexer.py
step gpu_rest 230 $P tests --ignore=tests/test_moe.py --ignore=tests/test_indexer.py
finish
