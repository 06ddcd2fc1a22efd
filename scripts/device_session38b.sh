#!/usr/bin/env bash
# Not run in session 38 (no H200 came; the H100 call's budget did not hold it). Written as session 38's second call:
# fp8_linear's space now holds PREFETCH "staged" (session 36; faster alone at most keys on an H100, not a default). Tune
# the three keys the 43-layer step looks up at 16 and 64 tokens (wo_b N = 4096, K = 1024; the shared expert slice's W1 /
# W3 N = 256, K = 4096 and W2 N = 4096, K = 256) on an H200, after a verify of fp8_linear into the same database (the
# export needs it), then judge the entries in the step (--try-entries, --keep-faster: only entries that make the step
# faster are kept).
#   run(command="KB_TOTAL_S=430 KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session38b.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-430}
source scripts/device_lib.sh || exit 1
step verify_fp8 70 $KB verify fp8_linear --impl triton --device cuda --shapes flash-tp8 --examples 2 --time-budget 5
for key in "N=4096 K=1024" "N=256 K=4096" "N=4096 K=256"; do
    set -- $key
    step "tune_${1#N=}_${2#K=}" 70 $KB tune fp8_linear --impl triton --shapes flash-tp8 --where M=16,64 --where "$1" \
        --where "$2" --max-trials 24 --budget 60 --export "$W/tuned.json"
done
entries=()
if [ -s "$W/tuned.json" ]; then entries=(--try-entries "$W/tuned.json" --keep-faster "$W/keep.json"); fi
step trial_step 110 $KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 16,64 --steps 30 \
    "${entries[@]}" --json "$W/trial_step.json"
finish
