#!/usr/bin/env bash
# Session 35, call 8: the shared expert slice's W2 keys (fp8_linear M = 16 / 64, N = 4096, K = 256), tuned in call 7 at
# 3.90 / 3.97 us but not exported (their path, v2 without split-K and x as operand A, had no verification in that
# database). Verify fp8_linear with the candidate tuned file (the packaged entries, call 7's kept M = 64, N = 256 entry
# and these two; verify covers every tuned config), then judge the two in the step.
#   run(command="KB_TOTAL_S=150 KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session35g.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-150}
source scripts/device_lib.sh || exit 1
export KERNELBENCH_TUNED="$PWD/data/h200-2026-12-05-session35/call8/tuned_candidate.json"
step verify_fp8 50 $KB verify fp8_linear --impl triton --device cuda --shapes flash-tp8 --examples 2 --time-budget 5
unset KERNELBENCH_TUNED
step trial_step 70 $KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 16,64 --steps 30 \
    --try-entries data/h200-2026-12-05-session35/call8/k256_entries.json --keep-faster "$W/k256_keep.json" --json "$W/trial_step.json"
finish
