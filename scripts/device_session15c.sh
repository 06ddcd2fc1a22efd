#!/usr/bin/env bash
# Session 15, call 3: the defaults after call 2. The shared expert split over the TP ranks only in steps of at most
# 15 tokens (kernelbench/decoder/model.py SHARED_SPLIT_MAX_T), the whole expert beside from 16; SHARED_X "own" only
# after the score gate. (1) the GPU tests of PDL bit-equality (the split and "own" now run at C = 1) and graph
# capture; (2) moe_layer at C = 1 (score: own, hash: gate); (3) the 43-layer step A B A B at C = 1, 16, 64 against
# KERNELBENCH_SHARED_SPLIT=0. Run in order (3), (1), (2): the step first.
#   run(command="KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session15c.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-330}
source scripts/device_lib.sh || exit 1
DB="$KB decode-bench --device cuda --impl triton --graph on --layers flash"
step a1 80 $DB --batches 1,16,64 --json "$W/a1.json"
step b1 50 env KERNELBENCH_SHARED_SPLIT=0 $DB --batches 1,16,64 --json "$W/b1.json"
step a2 35 $DB --batches 1,16,64 --json "$W/a2.json"
step b2 35 env KERNELBENCH_SHARED_SPLIT=0 $DB --batches 1,16,64 --json "$W/b2.json"
step gputests 100 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_pdl.py tests/test_graph_capture.py
step layer 25 $KB bench moe_layer --impl triton --shapes flash-tp8 --batch 1 --json "$W/layer.json"
step_times a1 b1 a2 b2
finish
