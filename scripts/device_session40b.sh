#!/usr/bin/env bash
# Session 40, call 2: config UP_EARLY "spec" (issue 9, the serial gate above one token): the MoE W1 / W3 launch
# started beside the routing launch under PDL, its routed items prefetching a guessed span of W1 / W3 into L2 before
# they wait. GPU tests (bit-equal to the default, eager and graph replay), the op rows beside the default on the same
# inputs, the 43-layer step at C = 16 / 64 in interleaved pairs, and GPU verify of the spaces' entry.
#   run(command="KB_TOTAL_S=420 KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session40b.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-420}
source scripts/device_lib.sh || exit 1
step gpu_tests 100 python3 -m pytest -q -m gpu tests/test_moe.py -k up_early -p no:cacheprovider
step ops 80 $KB bench moe_layer moe_routed --impl triton --shapes flash-tp8 --batch 16 --batch 64 --where hash=False \
    --max-time 0.3 --try 'moe_layer={"UP_EARLY": "spec"}' --try 'moe_routed={"UP_EARLY": "spec"}' --json "$W/ops.json"
step trial_step 120 $KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 16,64 --steps 30 \
    --try 'moe_routed={"UP_EARLY": "spec"}' --json "$W/trial_step.json"
step verify 90 $KB verify moe_routed --impl triton --device cuda --shapes flash-tp8 --where T=16,64 --examples 1 \
    --time-budget 3
finish
