#!/usr/bin/env bash
# Session 17, call 1: (1) the GPU tests that never ran on a GPU after session 16's last host changes (the lane-time
# test's three-stream expectation, Lanes through Beside, the join on error); (2) the 43-layer step at C = 1, 16, 64
# once more; (3) its per-op attribution with every kernel at C = 1 and 64 (issue 17's starting table).
#   run(command="KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session17a.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-420}
source scripts/device_lib.sh || exit 1
step gputests 200 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_decode_bench.py tests/test_lanes.py \
    tests/test_moe.py tests/test_pdl.py
DB="$KB decode-bench --device cuda --impl triton --graph on --layers flash"
step step 110 $DB --batches 1,16,64 --json "$W/step.json"
step_times step
step kernels 90 $DB --batches 1,64 --kernels --json "$W/kernels.json"
finish
