#!/usr/bin/env bash
# Session 23, call 2: which side work the main lane waits for (decode-bench --profile's new per-op "side work alone"
# line), and three candidates for the csa layers' chain at one token judged in the step: indexer_q's one-launch path
# (PATH "fused") and call 1's attention_front M = 1 tune, paired (--try); the one-launch indexer top-k (impl
# triton_fused), unpaired A B A B against the default.
#   run(command="KB_TOTAL_S=480 KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session23b.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-480}
source scripts/device_lib.sh || exit 1
DB="$KB decode-bench --device cuda --impl triton --graph on --layers flash"
step profile 150 $DB --batches 1,16,64 --profile --json "$W/profile.json"
FRONT='attention_front@M=1={"BM":1,"BN":64,"NB":1,"RB":1,"SPLIT":32,"num_stages":1,"num_warps":4}'
step try 120 $DB --batches 1 --try 'indexer_q@T=1={"PATH":"fused"}' --try "$FRONT" --json "$W/try.json"
step fused_a 45 $DB --batches 1 --use indexer_topk=triton_fused --json "$W/fused_a.json"
step plain_a 40 $DB --batches 1 --json "$W/plain_a.json"
step fused_b 40 $DB --batches 1 --use indexer_topk=triton_fused --json "$W/fused_b.json"
step plain_b 40 $DB --batches 1 --json "$W/plain_b.json"
step_times fused_a plain_a fused_b plain_b
finish
