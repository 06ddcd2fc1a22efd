#!/usr/bin/env bash
# Session 12, call 6: the routed-only MoE default above 32 tokens split (4, 2) (was (2, 1); sweep r9, call 5). GPU
# verify of the ops that take it, then the 43-layer step at C = 64 with the new default (A) and with the previous
# config pinned for moe_routed (B), in the order A B A B.
#   run(command="KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session12f.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-420}
source scripts/device_lib.sh || exit 1
OLD='{"BM":8,"BN_UP":64,"BN_DOWN":64,"SPLIT_UP":2,"SPLIT_DOWN":1,"num_warps":4,"num_stages":3,"DECODE":"fp8_asm","SHARED":"fused","SCALES":"ahead","SHARED_ITEMS":"per_tile","GATE":"gemm","BDIAG":true,"BM_SHARED":16}'
step verify 130 $KB verify moe_routed moe_experts --impl triton --device cuda --shapes flash-tp8 --examples 2 \
    --time-budget 5
for round in 1 2; do
    step "step_A${round}" 80 $KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 64 \
        --json "$W/step_A${round}.json"
    step "step_B${round}" 80 env KERNELBENCH_PIN_CONFIG="moe_routed=$OLD" $KB decode-bench --device cuda \
        --impl triton --graph on --layers flash --batches 64 --json "$W/step_B${round}.json"
done
finish
