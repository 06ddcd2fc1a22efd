#!/usr/bin/env bash
# Session 16, call 4: (1) every GPU test (`pytest -m gpu tests`) at the session's code; (2) a tune of attention_front
# and attention_q at C = 16 / 64 (no tuned entries there: 23.7 / 12.7 us per call at C = 64 in session 14's
# attribution against ~1.4 / 1 us of weight bytes) into a copy of the packaged table, then the 43-layer step at
# C = 16, 64, A B A B, packaged table (a) against the copy (b: KERNELBENCH_TUNED).
#   run(command="KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session16c.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-560}
source scripts/device_lib.sh || exit 1
step gputests 210 python3 -m pytest -q -m gpu -p no:cacheprovider tests
cp kernelbench/tuned/v1.json "$W/tuned16.json"
step tune 120 $KB tune attention_front attention_q --shapes flash-tp8 --batch 16 --batch 64 --max-trials 24 --top-k 3 \
    --rounds 2 --budget 110 --trial-timeout 20 --export "$W/tuned16.json"
DB="$KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 16,64"
step a1 80 $DB --json "$W/a1.json"
step b1 40 env KERNELBENCH_TUNED="$W/tuned16.json" $DB --json "$W/b1.json"
step a2 25 $DB --json "$W/a2.json"
step b2 25 env KERNELBENCH_TUNED="$W/tuned16.json" $DB --json "$W/b2.json"
step_times a1 b1 a2 b2
finish
