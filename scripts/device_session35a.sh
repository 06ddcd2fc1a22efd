#!/usr/bin/env bash
# Next session's first call (written in session 34, whose calls all ran on an H100). On whichever card comes (the
# script records it; an H200 gives issue 9's table on the card the issue names): the copy ceiling; the MoE table beside
# the triton_kernels peer; GATE_WARPS 8 at one token through `bench --try` (new in session 34: moe_layer through its
# tuned-config lookup, moe_gate over its default_config) and in the step (60 pairs); the whole GPU suite, with
# bench --try's GPU test (never run on a GPU yet).
#   run(command="KB_TOTAL_S=580 KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session35a.sh",
#       carry=[".whl", ".gpu_peers"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-580}
source scripts/device_lib.sh || exit 1
step copy 40 $KB calibrate --measure copy_gbps
step moe 150 $KB bench moe_layer moe_experts --impl triton --impl triton_kernels --shapes flash-tp8 --max-time 0.3
step gw8 60 $KB bench moe_gate moe_layer --impl triton --shapes flash-tp8 --batch 1 --max-time 0.5 \
    --try 'moe_gate={"GATE_WARPS": 8}' --try 'moe_layer={"GATE_WARPS": 8}' --json "$W/gw8.json"
step trial_gw8 90 $KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 1 --steps 60 \
    --try 'moe_routed@T=1={"GATE_WARPS": 8}' --json "$W/trial_gw8.json"
step gpu_all 220 python3 -m pytest -q -m gpu tests
finish
