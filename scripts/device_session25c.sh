#!/usr/bin/env bash
# Session 25, call 3. (1) Issue 9's "done when" verify, the four ops in one run (session 24 verified them across
# calls 4 and 6; call 4's run was cut by its limit). (2) sparse_attention_wo_a's JOIN with wider GEMV tiles at one
# token: call 1 measured BN_O 64 slower by 0.33 ms a step; each program there re-joins its head's split partials, so
# 1024 / BN_O programs read the same partials: BN_O 128 and 256 (8 warps; sm_90 / sm_120: 64 / 110 registers, no
# spills) read them 8 and 4 times. With the A/A control. (3) The step once as it ships, C = 1 / 16 / 64.
#   run(command="KB_TOTAL_S=420 KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session25c.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-420}
source scripts/device_lib.sh || exit 1
step verify 200 $KB verify moe_gate moe_experts shared_expert moe_layer --impl triton --device cuda \
    --shapes flash-tp8 --examples 2 --time-budget 5
step try 90 $KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 1 \
    --try 'sparse_attention_wo_a@T=1={"JOIN": true, "BN_O": 128, "O_WARPS": 8}' \
    --try 'sparse_attention_wo_a@T=1={"JOIN": true, "BN_O": 256, "O_WARPS": 8}' \
    --json "$W/try.json"
step final 80 $KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 1,16,64 \
    --json "$W/final.json"
step_times final
finish
