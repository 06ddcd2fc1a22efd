#!/usr/bin/env bash
# Session 34, call 4: GATE_ROWS "routed" made the default (call 3: moe_gate hash C = 1 3.03 vs 5.87 us, moe_layer 16.62
# vs 21.11 on the H100). Verify the MoE ops on the GPU with it; moe_gate / moe_layer at C = 1 beside the old default
# (triton_allrows) and GATE_WARPS 8 on the same inputs; the 43-layer step; paired step trials at C = 1 of the old
# default and of GATE_WARPS 8.
#   run(command="KB_TOTAL_S=480 KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session34d.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-480}
source scripts/device_lib.sh || exit 1
step verify 130 $KB verify moe_gate moe_layer moe_routed --impl triton --device cuda --shapes flash-tp8 \
    --examples 2 --time-budget 8
step gpu_moe 60 python3 -m pytest -q -m gpu tests/test_moe.py -k "routed_rows or hash"
step gate_c1 80 $KB bench moe_gate moe_layer --module scripts/gate_variants.py --impl triton --impl triton_allrows \
    --impl triton_gw8 --shapes flash-tp8 --batch 1 --max-time 0.5
step decode_flash 110 $KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 1,16,64 \
    --json "$W/decode_flash.json"
step_times decode_flash
step trial_c1 90 $KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 1 --steps 40 \
    --try 'moe_routed={"GATE_ROWS": "all"}' --try 'moe_routed@T=1={"GATE_WARPS": 8}' --json "$W/trial_c1.json"
finish
