#!/usr/bin/env bash
# Session 16, call 1: the shared expert on a side stream of moe_routed / moe_layer's own from 16 tokens (kernels/moe.py
# SHARED "side", SHARED_SIDE_MIN_T), so the decoder's TP split of the shared expert now runs at every token count.
# (0) the GPU graph-capture test of moe_layer (T = 16: "side" equals "beside" bit for bit, eager and replayed);
# (1) the 43-layer step A B A B at C = 1, 16, 64 against KERNELBENCH_SHARED_SPLIT=0 (the whole expert on the
# decoder's side lane from 16 tokens: session 15's path there); (2) moe_layer / moe_experts, today's default against
# triton_v5 (session 15's: the shared expert inside the routed launches at every T), same run.
#   run(command="KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session16a.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-480}
source scripts/device_lib.sh || exit 1
step capture 60 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_moe.py -k capturable
DB="$KB decode-bench --device cuda --impl triton --graph on --layers flash"
step a1 110 $DB --batches 1,16,64 --json "$W/a1.json"
step b1 50 env KERNELBENCH_SHARED_SPLIT=0 $DB --batches 1,16,64 --json "$W/b1.json"
step a2 40 $DB --batches 1,16,64 --json "$W/a2.json"
step b2 40 env KERNELBENCH_SHARED_SPLIT=0 $DB --batches 1,16,64 --json "$W/b2.json"
step_times a1 b1 a2 b2
step layer 120 $KB bench moe_layer moe_experts --impl triton --impl triton_v5 --shapes flash-tp8 --batch 1 --batch 16 \
    --batch 64 --json "$W/layer.json"
finish
