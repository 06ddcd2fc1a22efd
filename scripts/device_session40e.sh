#!/usr/bin/env bash
# Session 40, call 5: moe_routed's default with UP_EARLY "spec" from 16 tokens (routed_default): the 43-layer step as
# shipped with its attribution, the default against UP_EARLY "off" in interleaved pairs, and the MoE op rows.
#   run(command="KB_TOTAL_S=300 KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session40e.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-300}
source scripts/device_lib.sh || exit 1
step copy 30 $KB calibrate --measure copy_gbps
step step_attr 110 $KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 1,16,64 --profile \
    --json "$W/step_attr.json"
step trial_off 80 $KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 16,64 --steps 30 \
    --try 'moe_routed={"UP_EARLY": "off"}' --json "$W/trial_off.json"
step ops 70 $KB bench moe_routed moe_layer --impl triton --shapes flash-tp8 --where hash=False --max-time 0.3 \
    --json "$W/ops.json"
finish
