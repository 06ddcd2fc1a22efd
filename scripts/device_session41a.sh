#!/usr/bin/env bash
# For the next lent card (written in session 40, whose six calls all got an H100): UP_EARLY "spec" (moe_routed's
# default from 16 tokens since session 40, judged on the H100 only) on the card that comes: the 43-layer step with it
# off and with other guessing counts per SM, in interleaved pairs; then session 39's unrun tuning of the step's
# untuned 16 / 64-token keys, whose sm_120 pre-check now compiles on every core (KERNELBENCH_INSPECT_WORKERS), each
# op verified first into the same database (the export needs a passing verification of the chosen path) and the
# entries judged in the step (--try-entries, --keep-faster). moe_layer's rows with 1 and 2 guessing programs a SM.
# The steps add up to more than one call's 600 s: those past KB_TOTAL_S are skipped (status.txt names them), so the
# tuning, last, may need a second call.
#   run(command="KB_TOTAL_S=600 KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session41a.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-600}
source scripts/device_lib.sh || exit 1
# the shipped default (UP_EARLY "spec", 1 / 2 guessing programs a SM) has not been through `verify --device cuda`
# since session 40 set it (call 4 verified the spaces' entry at 4 a SM; the count is a runtime argument of the same
# build): verify it, and the GPU bit test
step verify_moe 70 $KB verify moe_routed --impl triton --device cuda --shapes flash-tp8 --where T=16,64 --examples 1 \
    --time-budget 3
step gpu_tests 90 python3 -m pytest -q -m gpu tests/test_moe.py -k "up_early and spec" -p no:cacheprovider
step early 110 $KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 16,64 --steps 30 \
    --try 'moe_routed={"UP_EARLY": "off"}' --try 'moe_routed@T=16={"UP_EARLY_PER_SM": 2}' \
    --try 'moe_routed@T=64={"UP_EARLY_PER_SM": 4}' --json "$W/early.json"
# moe_layer (issue 9's rows, the whole shared expert beside) with fewer guessing programs than session 40 tried (4 a
# SM: slower alone on the H100); copy first, for the fractions
step copy 30 $KB calibrate --measure copy_gbps
step layer_early 80 $KB bench moe_layer --impl triton --shapes flash-tp8 --batch 16 --batch 64 --where hash=False \
    --max-time 0.3 --try 'moe_layer={"UP_EARLY": "spec", "UP_EARLY_PER_SM": 1}' \
    --try 'moe_layer={"UP_EARLY": "spec", "UP_EARLY_PER_SM": 2}' --json "$W/layer_early.json"
V="--impl triton --device cuda --shapes flash-tp8 --examples 1 --time-budget 3"
T="--impl triton --shapes flash-tp8 --max-trials 16 --export $W/tuned.json"
step verify_lin 45 $KB verify fp8_linear $V --where M=16,64 --where K=256,4096
step verify_bf16 25 $KB verify bf16_linear $V --where M=16,64 --where K=4096
step tune_lin1 60 $KB tune fp8_linear $T --where M=16 --where N=256 --where K=4096 --budget 45
step tune_lin2 75 $KB tune fp8_linear $T --where M=16,64 --where N=4096 --where K=256 --budget 60
step tune_bf16 70 $KB tune bf16_linear $T --where M=16,64 --where N=64 --where K=4096 --budget 55
entries=()
if [ -s "$W/tuned.json" ]; then entries=(--try-entries "$W/tuned.json" --keep-faster "$W/keep.json"); fi
step trial_step 95 $KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 16,64 --steps 30 \
    "${entries[@]}" --json "$W/trial_step.json"
finish
