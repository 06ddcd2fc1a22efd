#!/usr/bin/env bash
# For the next H200 call (not run in session 11: its device time ran out): the two-launch ratio-4 compressor step at
# T = 1 (PATH "one", EMIT_MAX_T 0) as tuned entries in a copy of the packaged table, verified on the GPU there and
# judged on the step by decode-bench --ablate-tuned (paired steps with and without each op's tuned entries). If both
# pass, merge the two entries into kernelbench/tuned/v1.json (the step gained 1.7-2.0% at C = 1 in session 11's call
# 5, data/h200-2026-12-02-session11/call5).
#   run(command="KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session11f.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-220}
source scripts/device_lib.sh || exit 1
TWO='{"BLOCK_N":64,"BLOCK_K":128,"num_warps":4,"num_stages":3,"ROWS":16,"SPLIT":"auto","waves":2,"RB":2,"PATH":"one","EMIT_MAX_T":0}'
python3 scripts/tuned_variant.py compressor_step '{"T": 1, "ratio": 4}' "$TWO" "$W/tuned_two.json"
export KERNELBENCH_TUNED="$W/tuned_two.json"
step verify 50 $KB verify compressor_step --impl triton --device cuda --shapes flash-tp8 --examples 2 --time-budget 6
step ablate 150 $KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 1 --ablate-tuned \
    --json "$W/ablate.json"
finish
