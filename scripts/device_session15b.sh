#!/usr/bin/env bash
# Session 15, call 2. (a) The shared expert split over the TP ranks (kernelbench/decoder/model.py shared_split: each
# rank runs F / 8 of it inside its routed launches, the routed all-reduce sums it; before: rank 0 ran all of it
# inside its routed launches below 16 tokens, every rank all of it beside them from 16). (b) SHARED_X "own" (default
# under PDL, one token): the up launch's shared items quantize x themselves and stream the shared expert beside the
# gate instead of after it. Steps: GPU verify of moe_routed (flash-tp8 now with the TP slice) and moe_layer; moe_layer
# at C = 1 own vs gate (op bench, graph replay); the 43-layer step A B A B at C = 1, 16, 64, split (default) vs
# KERNELBENCH_SHARED_SPLIT=0; the split step at C = 1 with SHARED_X "gate" pinned; a --profile run at C = 1; the
# moe_routed op bench (score / hash / slice cases) if time is left.
#   run(command="KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session15b.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-590}
source scripts/device_lib.sh || exit 1
LAYER_GATE='{"BDIAG": true, "BM": 8, "BM_SHARED": 16, "BN_DOWN": 64, "BN_UP": 64, "DECODE": "fp8_asm", "FIN_TOKENS": 8, "GATE": "fused", "SCALES": "ahead", "SHARED": "fused", "SHARED_ITEMS": "per_tile", "SHARED_X": "gate", "SPLIT_DOWN": 2, "SPLIT_UP": 4, "num_stages": 3, "num_warps": 4}'
ROUTED_GATE='{"BDIAG": true, "BM": 8, "BM_SHARED": 16, "BN_DOWN": 64, "BN_UP": 64, "DECODE": "fp8_asm", "GATE": "fused", "SCALES": "ahead", "SHARED": "fused", "SHARED_ITEMS": "per_tile", "SHARED_X": "gate", "SPLIT_DOWN": 4, "SPLIT_UP": 8, "num_stages": 3, "num_warps": 4}'
step verify 130 $KB verify moe_routed moe_layer --impl triton --device cuda --shapes flash-tp8 --examples 3 \
    --time-budget 8
step layer_own 30 $KB bench moe_layer --impl triton --shapes flash-tp8 --batch 1 --json "$W/layer_own.json"
step layer_gate 30 env KERNELBENCH_PIN_CONFIG="moe_layer=$LAYER_GATE" $KB bench moe_layer --impl triton \
    --shapes flash-tp8 --batch 1 --json "$W/layer_gate.json"
DB="$KB decode-bench --device cuda --impl triton --graph on --layers flash"
step a1 90 $DB --batches 1,16,64 --json "$W/a1.json"
step b1 70 env KERNELBENCH_SHARED_SPLIT=0 $DB --batches 1,16,64 --json "$W/b1.json"
step a2 50 $DB --batches 1,16,64 --json "$W/a2.json"
step b2 50 env KERNELBENCH_SHARED_SPLIT=0 $DB --batches 1,16,64 --json "$W/b2.json"
step g1 35 env KERNELBENCH_PIN_CONFIG="moe_routed=$ROUTED_GATE" $DB --batches 1 --json "$W/g1.json"
step a3 30 $DB --batches 1 --json "$W/a3.json"
step prof 50 $DB --batches 1 --profile --json "$W/prof.json"
step bench 60 $KB bench moe_routed --impl triton --shapes flash-tp8 --json "$W/bench.json"
step_times a1 b1 a2 b2 g1 a3 prof
finish
