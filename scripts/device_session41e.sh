#!/usr/bin/env bash
# Session 41, call 5 (the session's last ~250 s of device time): attention_front at 16 and 64 tokens, never tuned
# there (decode-bench's untuned list; ~19.5 us alone at M = 64 on an H100, session 36, for 6.3 MB of weights): verified
# into the database, tuned (sm_120 pre-check on every core), and the entries judged in the step.
#   run(command="KB_TOTAL_S=200 KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session41e.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-200}
source scripts/device_lib.sh || exit 1
step verify_front 30 $KB verify attention_front --impl triton --device cuda --shapes flash-tp8 --examples 1 \
    --time-budget 3 --where M=16,64
T="--impl triton --shapes flash-tp8 --max-trials 24 --export $W/tuned.json"
step tune_front64 50 $KB tune attention_front $T --where M=64 --where compressed=False --budget 40
step tune_front16 45 $KB tune attention_front $T --where M=16 --where compressed=False --budget 35
entries=()
if [ -s "$W/tuned.json" ]; then entries=(--try-entries "$W/tuned.json" --keep-faster "$W/keep.json"); fi
step trial_step 70 $KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 16,64 --steps 20 \
    "${entries[@]}" --json "$W/trial_step.json"
finish
