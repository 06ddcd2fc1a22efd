#!/usr/bin/env bash
# Session 24, call 2: main-lane ops the step runs on untuned defaults at the keys where they cost most.
# (1) mhc_post_pre_norm (two calls a layer: 18.3 us a layer at C = 1, 12.6 us a call at C = 64, session 23 call 6)
# and attention_front at 16 / 64 tokens (22 us a layer at C = 64) tuned alone, each entry judged in the step
# (--try-entries, 20 interleaved pairs), the faster ones kept in $W/v1_kept.json; (2) the routed experts' K splits
# at one token in the step: the default (8, 4) was chosen for moe_layer with the whole shared expert (session 5),
# while the TP8 step's moe_routed carries a 1/8 slice of it; (16, 8), (16, 4), (8, 8) and (4, 2) as plain trials.
#   run(command="KB_TOTAL_S=540 KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session24b.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-540}
source scripts/device_lib.sh || exit 1
step verify 90 $KB verify mhc_post_pre_norm attention_front --impl triton --device cuda --shapes flash-tp8 \
    --examples 2 --time-budget 5
TUNE="$KB tune --shapes flash-tp8 --impl triton --max-trials 12 --top-k 3 --rounds 2 --trial-timeout 20 --export $W/tuned.json"
step tune_mhc 80 $TUNE mhc_post_pre_norm --where T=1,64 --budget 50
step tune_front 90 $TUNE attention_front --where M=16,64 --budget 60
cp kernelbench/tuned/v1.json "$W/v1_kept.json"
TRY=()
if [ -f "$W/tuned.json" ]; then TRY=(--try-entries "$W/tuned.json" --keep-faster "$W/v1_kept.json"); fi
MOE='"BM":8,"BN_UP":64,"BN_DOWN":64,"num_warps":4,"num_stages":3,"DECODE":"fp8_asm","SHARED":"fused","SCALES":"ahead","SHARED_ITEMS":"per_tile","GATE":"fused","BDIAG":true,"BM_SHARED":16'
step try 200 $KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 1,16,64 "${TRY[@]}" \
    --try "moe_routed@T=1={$MOE,\"SPLIT_UP\":16,\"SPLIT_DOWN\":8}" \
    --try "moe_routed@T=1={$MOE,\"SPLIT_UP\":16,\"SPLIT_DOWN\":4}" \
    --try "moe_routed@T=1={$MOE,\"SPLIT_UP\":8,\"SPLIT_DOWN\":8}" \
    --try "moe_routed@T=1={$MOE,\"SPLIT_UP\":4,\"SPLIT_DOWN\":2}" \
    --json "$W/try.json"
finish
