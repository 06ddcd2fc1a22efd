#!/usr/bin/env bash
# Session 24, call 5: main-lane ops on untuned defaults at C = 64 (call 4's lookups): mhc_post_pre_norm at T = 64
# (12.6 us a call, twice a layer) and attention_front at M = 64 (22 us a layer), whose keys call 2's tunes never
# reached (budgets spent at the other key), and sparse attention at 64 tokens (csa Ksel 640, swa Ksel 128: 13.6 us a
# layer, 21% of copy bandwidth); each tuned alone, then judged in the C = 64 step with the A/A control
# (--try-entries, 20 interleaved pairs); the faster ones kept in $W/v1_kept.json.
#   run(command="KB_TOTAL_S=360 KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session24e.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-360}
source scripts/device_lib.sh || exit 1
step verify 70 $KB verify mhc_post_pre_norm attention_front sparse_attention --impl triton --device cuda --shapes flash-tp8 \
    --examples 2 --time-budget 5
TUNE="$KB tune --shapes flash-tp8 --impl triton --max-trials 12 --top-k 3 --rounds 2 --trial-timeout 20 --export $W/tuned.json"
step tune_mhc 60 $TUNE mhc_post_pre_norm --where T=64 --budget 45
step tune_front 65 $TUNE attention_front --where M=64 --where compressed=False --budget 50
step tune_csa 45 $TUNE sparse_attention --where T=64 --where kind=csa --where ctx=512 --budget 30
step tune_swa 40 $TUNE sparse_attention --where T=64 --where kind=swa --budget 25
cp kernelbench/tuned/v1.json "$W/v1_kept.json"
TRY=()
if [ -f "$W/tuned.json" ]; then TRY=(--try-entries "$W/tuned.json" --keep-faster "$W/v1_kept.json"); fi
step try 100 $KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 64 "${TRY[@]}" \
    --json "$W/try.json"
finish
