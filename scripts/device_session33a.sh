#!/usr/bin/env bash
# Session 33, call 2: session 32a's two test steps, which ran out of time on an H100 in call 1 (45 s / 150 s): the
# indexer's GPU tests (the packed-terms test in its final form) and the whole GPU suite at this tree.
#   run(command="KB_TOTAL_S=500 KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session33a.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-500}
source scripts/device_lib.sh || exit 1
step gpu_indexer 170 python3 -m pytest -q -m gpu tests/test_indexer.py
step gpu_all 600 python3 -m pytest -q -m gpu tests --ignore=tests/test_indexer.py
finish
