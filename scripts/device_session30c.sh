#!/usr/bin/env bash
# Session 30, call 2: what call 1 (device_session30b.sh, commit 7a5ff41) could not finish. (1) GPU verify of
# csa_indices (the decode step's op; indexer_topk runs the same kernels) with the held top-k's new defaults and
# every config path of its space (STAGE_HELD false among them): call 1's verify was cut at 150 s while compiling;
# (2) the 43-layer step at 64K with paired trials of the previous select (ROW_TAIL, STAGE_HELD and SEARCH_WINDOW
# off: one 32768 block, _stage_top's pass, 16 counts) and of each change off alone (call 1's trial was refused:
# SEARCH_WINDOW 0 needed kernelbench/tuned_configs.py's _OFF_AT_ZERO).
#   run(command="KB_TOTAL_S=580 KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session30c.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-580}
source scripts/device_lib.sh || exit 1
DB="$KB decode-bench --device cuda --impl triton --graph on --layers flash"
step trial 250 $DB --context 65536 --batches 1,16,64 --steps 40 \
    --try 'csa_indices={"ROW_TAIL": false, "STAGE_HELD": false, "SEARCH_WINDOW": 0}' \
    --try 'csa_indices={"ROW_TAIL": false}' --try 'csa_indices={"STAGE_HELD": false}' \
    --try 'csa_indices={"SEARCH_WINDOW": 0}' --json "$W/trial.json"
step_times trial
step verify 320 $KB verify csa_indices --impl triton --device cuda --shapes flash-tp8-long --examples 2 \
    --time-budget 6
finish
