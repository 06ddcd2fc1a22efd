#!/usr/bin/env bash
# Prepared in session 17 for the next call (not yet run): (1) the GPU lane tests, including the KV lane's bit-equality
# (KERNELBENCH_KV_LANE / Lanes(kv_lane=True): the attention layers' KV compressor step on a stream of its own) and the
# MoE's shared side from 8 tokens; (2) the 43-layer step with the KV lane against without, A B A B, at C = 1, 16, 64;
# (3) kernelbench verify of moe_routed / moe_layer at the new side threshold's token counts (drawn examples).
#   run(command="KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session18a.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-420}
source scripts/device_lib.sh || exit 1
step gputests 150 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_lanes.py tests/test_moe.py \
    tests/test_decode_bench.py
DB="$KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 1,16,64"
step a1 110 $DB --json "$W/a1.json"
step k1 30 env KERNELBENCH_KV_LANE=1 $DB --json "$W/k1.json"
step a2 30 $DB --json "$W/a2.json"
step k2 30 env KERNELBENCH_KV_LANE=1 $DB --json "$W/k2.json"
step_times a1 k1 a2 k2
step verify 60 $KB verify moe_routed moe_layer --impl triton --device cuda --shapes flash-tp8 --examples 6
finish
