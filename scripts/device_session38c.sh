#!/usr/bin/env bash
# Session 38: two opt-in configs built this session for the one-token MoE, both prefetches of the routed experts'
# weights into L2 (the result is the same):
#  - W2_PREFETCH "routed": under PDL the W2 launch's routed items prefetch their expert's span before their wait, so
#    it streams while the W1/W3 launch runs (only the shared expert's span did);
#  - GATE_PREFETCH "experts": the one-launch gate's last program, once it has the top-k, prefetches the chosen local
#    experts' W1 / W3 codes and scales, before the W1/W3 launch starts.
# Verify (the space's covering entries), the GPU tests (bit-equal, eager and graph-replayed), then the op rows beside
# the default on the same inputs (bench --try) and the 43-layer step at C = 1 in interleaved pairs (decode-bench
# --try; the step's MoE is moe_routed).
#   run(command="KB_TOTAL_S=420 KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session38c.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-420}
source scripts/device_lib.sh || exit 1
W2='{"W2_PREFETCH": "routed"}'
GP='{"GATE_PREFETCH": "experts"}'
BOTH='{"W2_PREFETCH": "routed", "GATE_PREFETCH": "experts"}'
step copy 30 $KB calibrate --measure copy_gbps
step verify 80 $KB verify moe_layer moe_routed --impl triton --device cuda --shapes flash-tp8 --where T=1 \
    --examples 1 --time-budget 3
step gpu_test 60 python3 -m pytest -q -m gpu tests/test_moe.py -k prefetch
step ops 80 $KB bench moe_layer moe_routed --impl triton --shapes flash-tp8 --where T=1 --max-time 0.3 \
    --try "moe_layer@T=1=$W2" --try "moe_layer@T=1=$GP" --try "moe_layer@T=1=$BOTH" \
    --try "moe_routed@T=1=$W2" --try "moe_routed@T=1=$GP" --try "moe_routed@T=1=$BOTH" --json "$W/ops.json"
step step_pf 150 $KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 1 --steps 40 \
    --try "moe_routed@T=1=$W2" --try "moe_routed@T=1=$GP" --try "moe_routed@T=1=$BOTH" --json "$W/step_pf.json"
finish
