#!/usr/bin/env bash
# Session 11's first H200 call: GATE "in_up" (the fused gate's programs at the front of the W1/W3 launch, the new
# default of moe_layer / moe_routed at T <= 4) against the gate's own launch (GATE "fused"): verify, a same-input
# sweep, the 43-layer step at C = 1 both ways (the fused gate pinned for moe_routed), the MoE and lanes GPU tests.
#   run(command="KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session11.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-580}
source scripts/device_lib.sh || exit 1
# rank 0's moe_routed config at T = 1 (the shared expert inside) with the gate in its own launch
FUSED=$(cd /tmp && python3 -c "import json; from kernelbench.kernels.moe import grouped_default as g
print(json.dumps({**g({'T': 1, 'shared': True}), 'GATE': 'fused'}))")
echo "pin moe_routed=$FUSED" >> "$W/environment.txt"
DECODE="$KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 1"
step decode_in_up 170 $DECODE --json "$W/decode_in_up.json"
step decode_fused 90 env KERNELBENCH_PIN_CONFIG="moe_routed=$FUSED" $DECODE --json "$W/decode_fused.json"
step sweep 110 python3 scripts/moe_sweep.py --sweep r7 --cases moe_layer:1 moe_routed:1 --baselines triton_v4 \
    --max-time 0.1 --json "$W/sweep.json"
step decode_in_up_again 50 $DECODE --json "$W/decode_in_up_again.json"
step verify 120 $KB verify moe_routed moe_layer --device cuda --shapes flash-tp8 --examples 3 --time-budget 15
step gpu_tests 60 python3 -m pytest -q -p no:cacheprovider -o addopts="" -m gpu tests/test_moe.py tests/test_lanes.py
finish
