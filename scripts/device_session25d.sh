#!/usr/bin/env bash
# Session 25, call 4. sparse_attention_wo_a's JOIN with O_TILES (new: a program joins its 128 columns once and runs
# O_TILES tiles of BN_O rows against them, so O / (BN_O x O_TILES) programs read each split's partials instead of
# O / BN_O). Call 3 measured the re-join's cost falling with wider tiles (BN_O 64 / 128 / 256: -0.334 / -0.183 /
# -0.067 ms a step at C = 1). (1) The JOIN GPU test with the O_TILES path added; (2) --try at C = 1 with the A/A
# control: (BN_O, O_WARPS, O_TILES) = (64, 4, 4), (64, 4, 8), (64, 4, 16), (128, 8, 2), (128, 8, 4) (sm_90: 72-128
# registers, no spills).
#   run(command="KB_TOTAL_S=300 KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session25d.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-300}
source scripts/device_lib.sh || exit 1
step gpu_test 60 python3 -m pytest -q -rA -p no:cacheprovider -m gpu tests/test_attention.py
j() { echo "sparse_attention_wo_a@T=1={\"JOIN\": true, \"BN_O\": $1, \"O_WARPS\": $2, \"O_TILES\": $3}"; }
step try 150 $KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 1 \
    --try "$(j 64 4 4)" --try "$(j 64 4 8)" --try "$(j 64 4 16)" --try "$(j 128 8 2)" --try "$(j 128 8 4)" \
    --json "$W/try.json"
finish
