#!/usr/bin/env bash
# Session 17, call 4: (1) the side lane raised alone ("lane": the csa layers' compressor / indexer chain is the step's
# critical path at one token; call 2 found main raised alone +5.6% there) against the default (main,lane) and off,
# at C = 1, 4, 16, in the order d l o l d; (2) the GPU lane and decode-bench tests at this commit (stream priority
# default main,lane, Step.fixed_index_lists).
#   run(command="KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session17d.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-330}
source scripts/device_lib.sh || exit 1
DB="$KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 1,4,16"
step d1 110 $DB --json "$W/d1.json"
step l1 30 env KERNELBENCH_STREAM_PRIORITY=lane $DB --json "$W/l1.json"
step o1 30 env KERNELBENCH_STREAM_PRIORITY=off $DB --json "$W/o1.json"
step l2 30 env KERNELBENCH_STREAM_PRIORITY=lane $DB --json "$W/l2.json"
step d2 30 $DB --json "$W/d2.json"
step_times d1 l1 o1 l2 d2
step gputests 120 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_lanes.py tests/test_decode_bench.py
finish
