#!/usr/bin/env bash
# Session 50, call 3, for an H200 (the card issue 9 names; no H200 since session 46): issue 9's "done when" verify
# (moe_gate moe_experts shared_expert moe_layer at the fp8-promotion default, session 47), the copy ceiling and
# issue 9's table beside the triton_kernels peer (carry .gpu_peers), the 43-layer step at C = 1 / 16 / 64, then
# GATE_TAIL "up" at one token (on the H100, calls 1-2: faster in moe_layer alone, slower in the step).
#   run(command="KB_TOTAL_S=480 KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session50c.sh", carry=[".whl", ".gpu_peers"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-480}
source scripts/device_lib.sh || exit 1
UP='{"GATE_TAIL": "up"}'
step verify 130 $KB verify moe_gate moe_experts shared_expert moe_layer --impl triton --device cuda --shapes flash-tp8 \
    --examples 3
step copy 30 $KB calibrate --measure copy_gbps
peer=(); if [ -n "${KERNELBENCH_TRITON_KERNELS:-}" ]; then peer=(--impl triton_kernels); fi
step issue9 150 $KB bench moe_layer moe_experts --impl triton "${peer[@]}" --shapes flash-tp8 --where hash=False \
    --max-time 0.3 --json "$W/issue9.json"
step step 120 $KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 1,16,64 \
    --json "$W/step.json"
step_times step
step bench_up 50 $KB bench moe_layer moe_routed --impl triton --shapes flash-tp8 --where T=1 --where hash=False \
    --max-time 0.3 --try "moe_layer@T=1=$UP" --try "moe_routed@T=1=$UP" --json "$W/bench_up.json"
finish
