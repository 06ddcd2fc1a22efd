#!/usr/bin/env bash
# Session 25, call 6. sparse attention's combine over column blocks (config COMBINE_COLS, new: each `_attn_combine`
# program joins COMBINE_COLS of a head's 512 columns, so T x Hl x 512 / COMBINE_COLS programs instead of T x Hl; at one
# token 8 programs joined 20 splits x 512 columns each, 3.04 us a launch on one stream, call 5). (1) GPU verify of
# sparse_attention (the COMBINE_COLS config paths included); (2) --try COMBINE_COLS 64 / 128 / 256 at C = 1 and 16,
# with the A/A control.
#   run(command="KB_TOTAL_S=330 KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session25f.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-330}
source scripts/device_lib.sh || exit 1
step verify 60 $KB verify sparse_attention --impl triton --device cuda --shapes flash-tp8 --examples 2 --time-budget 5
c() { echo "sparse_attention@T=$1={\"COMBINE_COLS\": $2}"; }
step try 240 $KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 1,16 \
    --try "$(c 1,16 64)" --try "$(c 1,16 128)" --try "$(c 1,16 256)" --json "$W/try.json"
finish
