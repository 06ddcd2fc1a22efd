#!/usr/bin/env bash
# Session 15, call 2: the shared expert split over the TP ranks (kernelbench/decoder/model.py shared_split: each rank
# runs F / 8 of it inside its routed launches, the routed all-reduce sums it; before: rank 0 ran all of it inside its
# routed launches at C < 16, every rank all of it beside them from C = 16). (1) GPU verify of moe_routed (the flash-tp8
# cases now include the TP slice, Fs = 256) and moe_layer; (2) op bench of moe_routed (score / hash / slice cases);
# (3) the 43-layer step A B A B at C = 1, 16, 64: split (default) against KERNELBENCH_SHARED_SPLIT=0; (4) at C = 1 the
# split with the whole-shared-expert config pinned (the default takes the routed-only choices for a slice);
# (5) a --profile run of the split step at C = 1 (per-kernel times).
#   run(command="KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session15b.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-590}
source scripts/device_lib.sh || exit 1
WHOLE1='{"BDIAG": true, "BM": 8, "BM_SHARED": 16, "BN_DOWN": 64, "BN_UP": 64, "DECODE": "fp8_asm", "FIN_TOKENS": 8, "GATE": "fused", "SCALES": "ahead", "SHARED": "fused", "SHARED_ITEMS": "per_tile", "SPLIT_DOWN": 2, "SPLIT_UP": 4, "num_stages": 3, "num_warps": 4}'
step verify 150 $KB verify moe_routed moe_layer --impl triton --device cuda --shapes flash-tp8 --examples 3 \
    --time-budget 8
step bench 90 $KB bench moe_routed --impl triton --shapes flash-tp8 --json "$W/bench.json"
DB="$KB decode-bench --device cuda --impl triton --graph on --layers flash"
step a1 100 $DB --batches 1,16,64 --json "$W/a1.json"
step b1 80 env KERNELBENCH_SHARED_SPLIT=0 $DB --batches 1,16,64 --json "$W/b1.json"
step a2 60 $DB --batches 1,16,64 --json "$W/a2.json"
step b2 60 env KERNELBENCH_SHARED_SPLIT=0 $DB --batches 1,16,64 --json "$W/b2.json"
step w1 40 env KERNELBENCH_PIN_CONFIG="moe_routed=$WHOLE1" $DB --batches 1 --json "$W/w1.json"
step a3 40 $DB --batches 1 --json "$W/a3.json"
step w2 40 env KERNELBENCH_PIN_CONFIG="moe_routed=$WHOLE1" $DB --batches 1 --json "$W/w2.json"
step prof 90 $DB --batches 1,64 --profile --json "$W/prof.json"
step_times a1 b1 a2 b2 w1 a3 w2 prof
finish
