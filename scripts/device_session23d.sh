#!/usr/bin/env bash
# Session 23, call 4: (1) why call 3's indexer_topk entry (alone 6.77 vs 7.81 us) made the C = 1 step 0.2 ms slower:
# the default with one change at a time, paired in the step (the score launch's programs: waves; its warps and keys
# per block; the top-k's warps); (2) the side work waited for at C = 16 / 64 (call 2: compressor 49 / 58 us, index
# lists 31 / 11 us a step): those keys tuned alone, then judged in the step, the faster ones kept in $W/v1_kept.json.
#   run(command="KB_TOTAL_S=420 KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session23d.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-420}
source scripts/device_lib.sh || exit 1
DB="$KB decode-bench --device cuda --impl triton --graph on --layers flash"
D='"BLOCK_S":128,"num_warps":4,"num_stages":3,"SEGMENTS":"auto"'
T='indexer_topk@T=1@Hi=64'
step try_topk 110 $DB --batches 1 \
    --try "$T={$D,\"waves\":1,\"SCAN\":4096,\"TOPK_WARPS\":16}" \
    --try "$T={$D,\"waves\":2,\"SCAN\":4096,\"TOPK_WARPS\":16}" \
    --try "$T={$D,\"waves\":4,\"SCAN\":2048,\"TOPK_WARPS\":4}" \
    --try "$T={$D,\"waves\":4,\"SCAN\":2048,\"TOPK_WARPS\":8}" \
    --try "$T={\"BLOCK_S\":64,\"num_warps\":8,\"num_stages\":3,\"SEGMENTS\":\"auto\",\"waves\":4,\"SCAN\":4096,\"TOPK_WARPS\":16}" \
    --json "$W/try_topk.json"
step verify 60 $KB verify compressor_step attention_indices --impl triton --device cuda --shapes flash-tp8 \
    --examples 2 --time-budget 5
TUNE="$KB tune --shapes flash-tp8 --impl triton --max-trials 12 --top-k 3 --rounds 2 --trial-timeout 20 --export $W/tuned.json"
step tune_comp 90 $TUNE compressor_step --where T=16,64 --budget 60
step tune_idx 40 $TUNE attention_indices --where T=16,64 --where kind=csa --budget 15
cp kernelbench/tuned/v1.json "$W/v1_kept.json"
TRY=()
if [ -f "$W/tuned.json" ]; then TRY=(--try-entries "$W/tuned.json" --keep-faster "$W/v1_kept.json"); fi
step try 110 $DB --batches 16,64 "${TRY[@]}" --json "$W/try.json"
finish
