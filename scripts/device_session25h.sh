#!/usr/bin/env bash
# Session 25, call 8: the packaged sparse_attention T = 1 entry with COMBINE_COLS 64 (judged in call 7: +0.028 ms
# at C = 1, 60 pairs, control within +-0.008). (1) GPU verify of sparse_attention (the tuned entry is one of its config
# paths); (2) the step as shipped, C = 1 / 16 / 64.
#   run(command="KB_TOTAL_S=120 KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session25h.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-120}
source scripts/device_lib.sh || exit 1
step verify 40 $KB verify sparse_attention --impl triton --device cuda --shapes flash-tp8 --examples 2 --time-budget 3
step final 70 $KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 1,16,64 \
    --json "$W/final.json"
step_times final
finish
