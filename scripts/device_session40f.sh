#!/usr/bin/env bash
# Session 40, call 6: config DOWN_EARLY "exact" (the W2 launch beside the SwiGLU-quant launch under PDL, its first
# routed items prefetching their known W2 span): GPU test (bit-equal, graph replay) and the 43-layer step at C = 16 /
# 64 over the shipped default (UP_EARLY "spec" from 16 tokens), 4 and 2 prefetching programs per SM.
#   run(command="KB_TOTAL_S=200 KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session40f.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-200}
source scripts/device_lib.sh || exit 1
step gpu_test 60 python3 -m pytest -q -m gpu tests/test_moe.py -k "up_early and down" -p no:cacheprovider
step trial_step 110 $KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 16,64 --steps 30 \
    --try 'moe_routed={"DOWN_EARLY": "exact"}' --try 'moe_routed={"DOWN_EARLY": "exact", "DOWN_EARLY_PER_SM": 2}' \
    --json "$W/trial_step.json"
finish
