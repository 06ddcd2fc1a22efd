#!/usr/bin/env bash
# Session 41, call 2 (an H100 again): the whole GPU test suite (last run whole in session 35, one failure since
# mended; session 40's attribution assertion never ran on a GPU), with the triton_kernels peer carried; then
# mhc_post_pre_norm at 1 and 64 tokens, two calls a layer and never tuned at those keys (decode-bench's untuned
# list): verified into the database, tuned, and the entries judged in the step (--try-entries, --keep-faster).
#   run(command="KB_TOTAL_S=560 KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session41b.sh",
#       carry=[".whl", ".gpu_peers"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-560}
source scripts/device_lib.sh || exit 1
step gpu_suite 260 python3 -m pytest -q -m gpu tests -p no:cacheprovider -rs
V="--impl triton --device cuda --shapes flash-tp8 --examples 1 --time-budget 3"
T="--impl triton --shapes flash-tp8 --max-trials 40 --export $W/tuned.json"
step verify_mhc 40 $KB verify mhc_post_pre_norm $V --where T=1,64
step tune_mhc1 70 $KB tune mhc_post_pre_norm $T --where T=1 --where D=4096 --budget 55
step tune_mhc64 70 $KB tune mhc_post_pre_norm $T --where T=64 --where D=4096 --budget 55
entries=()
if [ -s "$W/tuned.json" ]; then entries=(--try-entries "$W/tuned.json" --keep-faster "$W/keep.json"); fi
step trial_step 100 $KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 1,64 --steps 30 \
    "${entries[@]}" --json "$W/trial_step.json"
finish
