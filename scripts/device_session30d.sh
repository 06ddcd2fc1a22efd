#!/usr/bin/env bash
# The GPU verdicts on session 30's held top-k (kernels/indexer.py: ROW_TAIL, STAGE_HELD, SEARCH_WINDOW, the carried
# count, SORT32): `kernelbench verify csa_indices` at flash-tp8-long with every config path of its space (session
# 30's call cut it at 150 s while compiling: 320 s here), and the GPU tests of the indexer (rows of 16,385-16,400
# scores in the tail, both stages, windows 2 / 512, against the radix select).
#   run(command="KB_TOTAL_S=400 KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session30d.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-400}
source scripts/device_lib.sh || exit 1
step gpu_test 60 python3 -m pytest -q -m gpu tests/test_indexer.py
step verify 320 $KB verify csa_indices --impl triton --device cuda --shapes flash-tp8-long --examples 2 \
    --time-budget 6
finish
