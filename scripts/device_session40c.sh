#!/usr/bin/env bash
# Session 40, call 3: UP_EARLY after call 2 (every program's guessed prefetch doubled the bytes: slower). "launch"
# (the W1 / W3 launch beside the routing launch under PDL, no prefetch) and "spec" now limited to the programs
# resident while the routing launch runs. GPU tests, the op rows beside the default, the 43-layer step at C = 16 / 64.
#   run(command="KB_TOTAL_S=400 KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session40c.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-400}
source scripts/device_lib.sh || exit 1
step gpu_tests 120 python3 -m pytest -q -m gpu tests/test_moe.py -k up_early -p no:cacheprovider
step ops 80 $KB bench moe_layer moe_routed --impl triton --shapes flash-tp8 --batch 16 --batch 64 --where hash=False \
    --max-time 0.3 --try 'moe_layer={"UP_EARLY": "launch"}' --try 'moe_routed={"UP_EARLY": "launch"}' \
    --try 'moe_layer={"UP_EARLY": "spec"}' --try 'moe_routed={"UP_EARLY": "spec"}' --json "$W/ops.json"
step trial_step 150 $KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 16,64 --steps 30 \
    --try 'moe_routed={"UP_EARLY": "launch"}' --try 'moe_routed={"UP_EARLY": "spec"}' --json "$W/trial_step.json"
finish
