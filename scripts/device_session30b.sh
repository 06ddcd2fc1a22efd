#!/usr/bin/env bash
# Session 30, call 1 (30a was refused twice before it ran): three changes to the held top-k (kernels/indexer.py),
# each a config that is on by default: ROW_TAIL (`held_block`: the decode step's key cache at 64K tokens holds
# 16,400 entries, which the held select counted over a 32768 block, 43-44 us a top-k in the step against ~30 us
# alone at 16384, session 29 call 3; now 16384 + a 512 tail), STAGE_HELD (`_stage_block`: the stage from the held
# registers, its scan in rows of 32) and SEARCH_WINDOW 512 (the binary search's first count 512 halves below the
# row's largest: ~9 counts instead of 16 when the k-th key lies there). (1) GPU verify of csa_indices /
# indexer_topk (also the one-scan stage of fd2f293, whose verify call 4 of session 29 cut) and the GPU top-k test
# (rows of 16,385-16,400 scores in the tail); (2) the 43-layer step at 64K with paired trials of the previous select (all three off: one 32768 block, _stage_top's pass, 16 counts) and of
# each change off alone; (3) csa_indices alone at 64K (16384 entries: no tail) new / STAGE_HELD and window off;
# (4) the C = 64 step at context 512 with per-kernel attribution (issue 9's gate / route / combine).
#   run(command="KB_TOTAL_S=570 KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session30b.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-570}
source scripts/device_lib.sh || exit 1
step verify 150 $KB verify csa_indices indexer_topk --impl triton --device cuda --shapes flash-tp8-long --examples 2 \
    --time-budget 6
step gpu_test 60 python3 -m pytest -q -m gpu tests/test_indexer.py
DB="$KB decode-bench --device cuda --impl triton --graph on --layers flash"
step trial 240 $DB --context 65536 --batches 1,16,64 --steps 40 \
    --try 'csa_indices={"ROW_TAIL": false, "STAGE_HELD": false, "SEARCH_WINDOW": 0}' \
    --try 'csa_indices={"ROW_TAIL": false}' --try 'csa_indices={"STAGE_HELD": false}' \
    --try 'csa_indices={"SEARCH_WINDOW": 0}' --json "$W/trial.json"
step_times trial
ALONE="$KB bench csa_indices --impl triton --shapes flash-tp8-long --batch 1 --batch 16 --batch 64 --context 65536 \
    --where ragged=False --max-time 0.3"
step alone_n 30 $ALONE --json "$W/alone_n.json"
variant_of kernels/indexer.py idx_new idx_mem 's/_flag(cfg, "STAGE_HELD", True)/_flag(cfg, "STAGE_HELD", False)/;s/^SEARCH_WINDOW_DEFAULT = 512$/SEARCH_WINDOW_DEFAULT = 0/'
use_variant kernels/indexer.py idx_mem; step alone_m 30 $ALONE --json "$W/alone_m.json"
use_variant kernels/indexer.py idx_new
step moe64 60 $DB --context 512 --batches 64 --kernels --json "$W/moe64.json"
finish
