#!/usr/bin/env bash
# Session 38: config W2_PREFETCH "routed" (built this session, opt-in): at one token, under PDL, the MoE W2 launch's
# routed items bulk-prefetch their expert's weight span into L2 before their wait, so it streams while the W1/W3
# launch runs (only the shared expert's span did). Verify (the space's covering entry), the GPU test (bit-equal,
# eager and graph-replayed), then the op rows beside the default on the same inputs (bench --try) and the 43-layer
# step at C = 1 in interleaved pairs (decode-bench --try; the step's MoE is moe_routed).
#   run(command="KB_TOTAL_S=330 KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session38c.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-330}
source scripts/device_lib.sh || exit 1
W2='{"W2_PREFETCH": "routed"}'
step copy 30 $KB calibrate --measure copy_gbps
step verify 70 $KB verify moe_layer moe_routed --impl triton --device cuda --shapes flash-tp8 --where T=1 \
    --examples 1 --time-budget 3
step gpu_test 60 python3 -m pytest -q -m gpu tests/test_moe.py -k w2_prefetch
step ops 60 $KB bench moe_layer moe_routed --impl triton --shapes flash-tp8 --where T=1 --max-time 0.3 \
    --try "moe_layer@T=1=$W2" --try "moe_routed@T=1=$W2" --json "$W/ops.json"
step step_w2 100 $KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 1 --steps 40 \
    --try "moe_routed@T=1=$W2" --json "$W/step_w2.json"
finish
