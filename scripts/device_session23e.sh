#!/usr/bin/env bash
# Session 23, call 5 (the last of the session): (1) two hand-written GEMV entries judged in the step at C = 1
# (data/h200-2026-12-04-session23/call5/candidates.json: attention_q M = 1 and indexer_q's wq_b, fp8_linear M = 1
# N = 8192 K = 1024, in the shape of call 2's attention_front entry), the faster ones kept in $W/v1_kept.json; (2) the
# kept table installed in place of the packaged one, then the step as it will ship, twice at C = 1 / 16 / 64;
# (3) GPU verify of the ops whose table entries changed this session (the explicit-default path included) and the
# GPU test of the attribution's lanes (the per-op side-work line).
#   run(command="KB_TOTAL_S=420 KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session23e.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-420}
source scripts/device_lib.sh || exit 1
DB="$KB decode-bench --device cuda --impl triton --graph on --layers flash"
cp kernelbench/tuned/v1.json "$W/v1_kept.json"
step try 80 $DB --batches 1 --try-entries data/h200-2026-12-04-session23/call5/candidates.json \
    --keep-faster "$W/v1_kept.json" --json "$W/try.json"
cp "$W/v1_kept.json" "$(installed kernelbench/tuned/v1.json)"
step f1 70 $DB --batches 1,16,64 --json "$W/f1.json"
step f2 50 $DB --batches 1,16,64 --json "$W/f2.json"
step_times f1 f2
step verify 100 $KB verify attention_front attention_q fp8_linear compressor_step attention_indices --impl triton \
    --device cuda --shapes flash-tp8 --examples 2 --time-budget 5
step gpu_test 80 python3 -m pytest -q -m gpu tests/test_decode_bench.py -k "attribution_adds_up"
finish
