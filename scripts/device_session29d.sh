#!/usr/bin/env bash
# Session 29, call 4: the top-k's stage with one packed scan a step (kernels/indexer.py _stage_top: the above / equal
# flags in one int32, totals from one sum; was two scans and two sums a step, ~47% of the one-program top-k's
# instructions at 64K tokens, call 3) against the stage before it ("b": commit 80c7d68's indexer.py, made by
# `mkdir -p scripts/ab && git show 80c7d68:kernels/indexer.py > scripts/ab/indexer_before.py`; git ignores scripts/ab,
# the call carries it). (1) GPU verify of the changed ops; (2) csa_indices alone at 64K, T = 1 / 16 / 64,
# new / before; (3) the 43-layer step at 64K, new / before alternating (A B A B), with a SCAN 8192 trial in the
# new runs (40 pairs against the A/A control). In the step the top-k took 43-44 us a call at every C (call 3: the
# step's 16,400-entry cache holds rows in a 32768 block) against ~30 us alone (16384 entries): also trials of two
# held blocks (ROW_LEVELS 2: a 16384-score row in the 16384 block).
#   run(command="KB_TOTAL_S=210 KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session29d.sh", carry=[".whl", "scripts/ab"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-210}
source scripts/device_lib.sh || exit 1
[ -f scripts/ab/indexer_before.py ] || { echo "scripts/ab/indexer_before.py missing (carry scripts/ab)"; exit 1; }
IDX="$(installed kernels/indexer.py)"
cp "$IDX" "$W/idx_new.py"
step verify 40 $KB verify csa_indices indexer_topk --impl triton --device cuda --shapes flash-tp8-long --examples 2 \
    --time-budget 6
ALONE="$KB bench csa_indices --impl triton --shapes flash-tp8-long --batch 1 --batch 16 --batch 64 --context 65536 \
    --where ragged=False --max-time 0.3"
step alone_n 30 $ALONE --json "$W/alone_n.json"
cp scripts/ab/indexer_before.py "$IDX"; step alone_b 30 $ALONE --json "$W/alone_b.json"
DB="$KB decode-bench --device cuda --impl triton --graph on --layers flash --context 65536"
for r in 1 2; do
    cp "$W/idx_new.py" "$IDX"
    if [ $r = 1 ]; then
        step n$r 105 $DB --batches 1,16,64 --steps 40 --try 'csa_indices={"SCAN": 8192}' \
            --try 'csa_indices={"ROW_LEVELS": 2}' --json "$W/n$r.json"
    else
        step n$r 40 $DB --batches 1,16,64 --json "$W/n$r.json"
    fi
    cp scripts/ab/indexer_before.py "$IDX"; step b$r 40 $DB --batches 1,16,64 --json "$W/b$r.json"
done
cp "$W/idx_new.py" "$IDX"
step_times n1 b1 n2 b2
rm -f "$W/idx_new.py"
finish
