#!/usr/bin/env bash
# Session 39: the step's untuned keys at 16 / 64 tokens that run once or more a layer (decode-bench's list at eeee853,
# H200): the shared expert slice's fp8_linear (M = 16: N = 256, K = 4096; M = 16 / 64: N = 4096, K = 256) and the
# indexer's weights_proj bf16_linear (N = 64, K = 4096); attention_front M = 16 / 64 was left out for the device time
# left (session 24 tuned M = 64: the default). Each op is verified first into the same database (the export needs a
# passing verification of each chosen path), tuned alone, and the entries are judged in the 43-layer step
# (--try-entries, --keep-faster: only entries that make the step faster are kept).
#   run(command="KB_TOTAL_S=250 KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session39d.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-250}
source scripts/device_lib.sh || exit 1
V="--impl triton --device cuda --shapes flash-tp8 --examples 1 --time-budget 3"
T="--impl triton --shapes flash-tp8 --max-trials 16 --export $W/tuned.json"
step verify_lin 45 $KB verify fp8_linear $V --where M=16,64 --where K=256,4096
step verify_bf16 25 $KB verify bf16_linear $V --where M=16,64 --where K=4096
step tune_lin1 25 $KB tune fp8_linear $T --where M=16 --where N=256 --where K=4096 --budget 20
step tune_lin2 35 $KB tune fp8_linear $T --where M=16,64 --where N=4096 --where K=256 --budget 30
step tune_bf16 30 $KB tune bf16_linear $T --where M=16,64 --where N=64 --where K=4096 --budget 25
entries=()
if [ -s "$W/tuned.json" ]; then entries=(--try-entries "$W/tuned.json" --keep-faster "$W/keep.json"); fi
step trial_step 95 $KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 16,64 --steps 30 \
    "${entries[@]}" --json "$W/trial_step.json"
finish
