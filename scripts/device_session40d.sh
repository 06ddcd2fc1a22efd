#!/usr/bin/env bash
# Session 40, call 4: UP_EARLY "spec" after call 3 (H100: the 43-layer step at C = 64 0.078 ms faster, at C = 16
# 0.085 ms slower; "launch" within noise at both). How many programs per SM should guess (UP_EARLY_PER_SM), where
# between 16 and 64 tokens it starts to pay, GPU verify of moe_routed's paths (UP_EARLY now among them) and the GPU test.
#   run(command="KB_TOTAL_S=330 KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session40d.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-330}
source scripts/device_lib.sh || exit 1
step gpu_test 60 python3 -m pytest -q -m gpu tests/test_moe.py -k "up_early and spec and 64" -p no:cacheprovider
step step64 100 $KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 64 --steps 30 \
    --try 'moe_routed={"UP_EARLY": "spec", "UP_EARLY_PER_SM": 2}' --try 'moe_routed={"UP_EARLY": "spec"}' \
    --try 'moe_routed={"UP_EARLY": "spec", "UP_EARLY_PER_SM": 8}' --json "$W/step64.json"
step step16_32 90 $KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 16,32 --steps 30 \
    --try 'moe_routed={"UP_EARLY": "spec", "UP_EARLY_PER_SM": 1}' --try 'moe_routed={"UP_EARLY": "spec"}' \
    --json "$W/step16_32.json"
step verify 70 $KB verify moe_routed --impl triton --device cuda --shapes flash-tp8 --where T=16,64 --examples 1 \
    --time-budget 3
finish
