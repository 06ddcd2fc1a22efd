#!/usr/bin/env bash
# Session 23, call 3: the side work the main lane waits for at one token (call 2: the indexer top-k 164 us a step,
# the compressor 91, the csa index lists 42) ran untuned configs: tune those keys at T = 1 alone, judge each entry in
# the step (--try-entries, 20 interleaved pairs at C = 1), keep the faster ones in $W/v1_kept.json.
#   run(command="KB_TOTAL_S=540 KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session23c.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-540}
source scripts/device_lib.sh || exit 1
TUNE="$KB tune --shapes flash-tp8 --impl triton --max-trials 14 --top-k 3 --rounds 2 --trial-timeout 20 --export $W/tuned.json"
step verify 100 $KB verify indexer_topk compressor_step attention_indices --impl triton --device cuda --shapes flash-tp8 \
    --examples 2 --time-budget 5
step tune_topk 110 $TUNE indexer_topk --where T=1 --where Hi=64 --budget 70
step tune_comp 130 $TUNE compressor_step --where T=1 --budget 90
step tune_idx 50 $TUNE attention_indices --where T=1 --where kind=csa --budget 20
cp kernelbench/tuned/v1.json "$W/v1_kept.json"
TRY=()
if [ -f "$W/tuned.json" ]; then TRY=(--try-entries "$W/tuned.json" --keep-faster "$W/v1_kept.json"); fi
step try 130 $KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 1 "${TRY[@]}" \
    --json "$W/try.json"
finish
