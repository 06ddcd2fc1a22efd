#!/usr/bin/env bash
# Session 23, call 6 (the last): the new op csa_indices (the csa lists written by the top-k, one launch fewer on the
# path the step's sparse attention waits on) verified on the H200 (its ROW false path and impl triton_parts too;
# indexer_topk, whose emit changed), judged in the step against the two ops in interleaved pairs at C = 1 / 16 / 64
# (--try 'csa_indices={"ROW": false}': the step as before), the step as it ships with --profile (the side work
# alone by op), and the GPU tests of the lanes (the streamed step bit-equal to one stream).
#   run(command="KB_TOTAL_S=350 KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session23f.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-350}
source scripts/device_lib.sh || exit 1
DB="$KB decode-bench --device cuda --impl triton --graph on --layers flash"
step verify 70 $KB verify csa_indices indexer_topk --impl triton --impl triton_parts --device cuda --shapes flash-tp8 \
    --examples 2 --time-budget 5
step try 120 $DB --batches 1,16,64 --try 'csa_indices={"ROW": false}' --json "$W/try.json"
step profile 90 $DB --batches 1,16,64 --profile --json "$W/profile.json"
step gpu_test 60 python3 -m pytest -q -m gpu tests/test_lanes.py
step_times profile
finish
