#!/usr/bin/env bash
# Session 39, call 8: the step's untuned keys at 16 / 64 tokens that run once or more a layer (decode-bench's list at
# eeee853, H200): attention_front M = 16 / 64, the shared expert slice's fp8_linear (M = 16: N = 256, K = 4096; M = 16 /
# 64: N = 4096, K = 256) and the indexer's weights_proj bf16_linear (N = 64, K = 4096). Each op is verified first into
# the same database (the export needs a passing verification of each chosen path), tuned alone, and the entries are
# judged in the 43-layer step (--try-entries, --keep-faster: only entries that make the step faster are kept).
#   run(command="KB_TOTAL_S=400 KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session39d.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-400}
source scripts/device_lib.sh || exit 1
V="--impl triton --device cuda --shapes flash-tp8 --examples 1 --time-budget 3"
T="--impl triton --shapes flash-tp8 --max-trials 16 --export $W/tuned.json"
step verify_front 40 $KB verify attention_front $V --where M=16,64
step verify_lin 50 $KB verify fp8_linear $V --where M=16,64 --where K=256,4096
step verify_bf16 30 $KB verify bf16_linear $V --where M=16,64 --where K=4096
step tune_front 55 $KB tune attention_front $T --where M=16,64 --budget 50
step tune_lin1 30 $KB tune fp8_linear $T --where M=16 --where N=256 --where K=4096 --budget 25
step tune_lin2 40 $KB tune fp8_linear $T --where M=16,64 --where N=4096 --where K=256 --budget 35
step tune_bf16 35 $KB tune bf16_linear $T --where M=16,64 --where N=64 --where K=4096 --budget 30
entries=()
if [ -s "$W/tuned.json" ]; then entries=(--try-entries "$W/tuned.json" --keep-faster "$W/keep.json"); fi
step trial_step 120 $KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 16,64 --steps 30 \
    "${entries[@]}" --json "$W/trial_step.json"
finish
