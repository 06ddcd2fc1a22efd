#!/usr/bin/env bash
# Session 30's held top-k in the 43-layer step at 64K tokens (not timed in session 30: its trial was refused, then
# the device was paused). The changes (kernels/indexer.py), each on by default: ROW_TAIL (the step's 16,400-entry
# cache held in 16384 + a 512 tail, not a 32768 block), STAGE_HELD (the stage from the held registers),
# SEARCH_WINDOW 512 (~9 counts instead of 16), and two without a config: the count above the threshold carried by
# the search, and SORT32 (the final sort on 32-bit values). sm_90 static SASS per warp, run: ~9,291 -> ~4,552 at
# 16,400 entries. (1) The step with paired trials of the three configs off together and one at a time, of window
# widths 256 / 2048, and of the opt-in split top-k with held segments and merge (SPLIT_HELD: 4 segments of 4,100
# scores at one token; sm_90 static SASS 4,405 against the radix split's 9,317), 40 pairs each; (2) csa_indices
# alone at 64K (16,384 entries) with the session's starting indexer.py ("before": `mkdir -p scripts/ab && git show
# 1fd0a27:kernels/indexer.py > scripts/ab/indexer_before.py`, carried) and the new one.
#   run(command="KB_TOTAL_S=450 KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session30c.sh",
#       carry=[".whl", "scripts/ab"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-450}
source scripts/device_lib.sh || exit 1
ab_setup kernels/indexer.py scripts/ab/indexer_before.py || exit 1
DB="$KB decode-bench --device cuda --impl triton --graph on --layers flash --context 65536"
step trial 360 $DB --batches 1,16,64 --steps 40 \
    --try 'csa_indices={"ROW_TAIL": false, "STAGE_HELD": false, "SEARCH_WINDOW": 0}' \
    --try 'csa_indices={"ROW_TAIL": false}' --try 'csa_indices={"STAGE_HELD": false}' \
    --try 'csa_indices={"SEARCH_WINDOW": 0}' --try 'csa_indices={"SEARCH_WINDOW": 256}' \
    --try 'csa_indices={"SEARCH_WINDOW": 2048}' \
    --try 'csa_indices={"SEGMENTS": 4, "SEG_MIN": 1024, "SPLIT_HELD": true}' --json "$W/trial.json"
step_times trial
ALONE="$KB bench csa_indices --impl triton --shapes flash-tp8-long --batch 1 --batch 16 --batch 64 --context 65536 \
    --where ragged=False --max-time 0.3"
step alone_n 30 $ALONE --json "$W/alone_n.json"
ab_use before; step alone_b 30 $ALONE --json "$W/alone_b.json"
ab_use new; rm -f "$W/ab_new.py" "$W/ab_before.py"
finish
