#!/usr/bin/env bash
# Session 35, call 7: call 6's one-stream table at C = 64 (H200) has the shared expert's rank slice (fp8_linear at
# M = 64, N = 256, K = 4096 and N = 4096, K = 256, 1 MB of weight each) at 12.5 / 18.1 / 6.1 us a launch, on configs
# borrowed from the 8 MB keys (BN 128, SPLIT 4: 16 programs for N = 256). Tune those keys at C = 16 and 64 (after a
# verify of fp8_linear into the same database, which the export needs), then judge the entries in the step
# (--try-entries, --keep-faster).
#   run(command="KB_TOTAL_S=330 KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session35f.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-330}
source scripts/device_lib.sh || exit 1
step verify_fp8 70 $KB verify fp8_linear --impl triton --device cuda --shapes flash-tp8 --examples 2 --time-budget 5
step tune_a 70 $KB tune fp8_linear --impl triton --shapes flash-tp8 --where M=16,64 --where N=256 --where K=4096 \
    --max-trials 24 --budget 60 --export "$W/shared_tuned.json"
step tune_b 70 $KB tune fp8_linear --impl triton --shapes flash-tp8 --where M=16,64 --where N=4096 --where K=256 \
    --max-trials 24 --budget 60 --export "$W/shared_tuned.json"
entries=()
if [ -s "$W/shared_tuned.json" ]; then entries=(--try-entries "$W/shared_tuned.json" --keep-faster "$W/shared_keep.json"); fi
step trial_step 100 $KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 16,64 --steps 30 \
    "${entries[@]}" --json "$W/trial_step.json"
finish
