#!/usr/bin/env bash
# Session 16, call 3: (1) verify moe_routed and moe_experts (impl triton) at flash-tp8: the TP slice of the shared
# expert on the op's side stream at T = 16 / 64; (2) where "side" should start: the 43-layer step at C = 2, 4, 8,
# A B A B, default (SHARED_SIDE_MIN_T = 16: the slice inside the routed launches there) against the installed
# kernels/moe.py with SHARED_SIDE_MIN_T = 2 (the slice beside from 2 tokens); (3) moe_layer at C = 1 with SHARED
# "side" pinned (the whole expert beside the one-token chain) against the default ("fused", SHARED_X "own").
#   run(command="KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session16b.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-420}
source scripts/device_lib.sh || exit 1
step verify 130 $KB verify moe_routed moe_experts --impl triton --device cuda --shapes flash-tp8 --examples 2
MOE="$(installed kernels/moe.py)"
cp "$MOE" /tmp/moe_default.py
sed 's/^SHARED_SIDE_MIN_T = 16$/SHARED_SIDE_MIN_T = 2/' /tmp/moe_default.py > /tmp/moe_side2.py
grep -q '^SHARED_SIDE_MIN_T = 2$' /tmp/moe_side2.py || echo "side2 patch did not apply" | tee -a "$W/status.txt"
DB="$KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 2,4,8"
step a1 100 $DB --json "$W/a1.json"
cp /tmp/moe_side2.py "$MOE"; step b1 60 $DB --json "$W/b1.json"
cp /tmp/moe_default.py "$MOE"; step a2 40 $DB --json "$W/a2.json"
cp /tmp/moe_side2.py "$MOE"; step b2 40 $DB --json "$W/b2.json"
cp /tmp/moe_default.py "$MOE"
step_times a1 b1 a2 b2
SIDE1='{"BM":8,"BN_UP":64,"BN_DOWN":64,"SPLIT_UP":8,"SPLIT_DOWN":4,"num_warps":4,"num_stages":3,"DECODE":"fp8_asm","SHARED":"side","SCALES":"ahead","SHARED_ITEMS":"per_tile","GATE":"fused","BDIAG":true,"BM_SHARED":16}'
step layer1 40 $KB bench moe_layer --impl triton --shapes flash-tp8 --batch 1 --json "$W/layer1.json"
step layer1side 40 env KERNELBENCH_PIN_CONFIG="moe_layer=$SIDE1" $KB bench moe_layer --impl triton --shapes flash-tp8 \
    --batch 1 --json "$W/layer1side.json"
finish
