#!/usr/bin/env bash
# Next session's first call (written in session 33, whose calls all ran on an H100). On whichever card comes (the
# script records it; an H200 gives issue 9's table on the card the issue names): the copy ceiling; the MoE table with
# the timed inputs' own bytes beside the triton_kernels peer; the 43-layer step with its attribution (decode-bench's
# per-op bytes now count each MoE call's own routing through the reference gate: not yet run on a GPU); a paired trial
# of GATE_ROWS "routed" in the step at C = 1; the GPU suite.
#   run(command="KB_TOTAL_S=650 KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session34a.sh",
#       carry=[".whl", ".gpu_peers"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-650}
source scripts/device_lib.sh || exit 1
step copy 40 $KB calibrate --measure copy_gbps
step moe 170 $KB bench moe_layer moe_experts --impl triton --impl triton_kernels --shapes flash-tp8 --max-time 0.3
step decode_flash 120 $KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 1,16,64 \
    --profile --json "$W/decode_flash.json"
step_times decode_flash
# session 33's GATE_ROWS "routed" (hash layers score only the K routed experts' gate rows; built without a GPU):
# paired in the step at C = 1, the only batch whose gate is the one-launch gate that has it (T <= 4)
step trial_rows 90 $KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 1 --steps 30 \
    --try 'moe_routed={"GATE_ROWS": "routed"}' --json "$W/trial_rows.json"
step gpu_all 220 python3 -m pytest -q -m gpu tests
finish
