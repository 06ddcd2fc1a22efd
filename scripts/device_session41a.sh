#!/usr/bin/env bash
# For the next lent card (written in session 40, whose six calls all got an H100): UP_EARLY "spec" (moe_routed's
# default from 16 tokens since session 40, judged on the H100 only) on the card that comes: the 43-layer step with it
# off and with other guessing counts per SM, in interleaved pairs; then session 39's unrun tuning of the step's
# untuned 16 / 64-token keys, whose sm_120 pre-check now compiles on every core (KERNELBENCH_INSPECT_WORKERS), each
# op verified first into the same database (the export needs a passing verification of the chosen path) and the
# entries judged in the step (--try-entries, --keep-faster).
#   run(command="KB_TOTAL_S=480 KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session41a.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-480}
source scripts/device_lib.sh || exit 1
step early 110 $KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 16,64 --steps 30 \
    --try 'moe_routed={"UP_EARLY": "off"}' --try 'moe_routed@T=16={"UP_EARLY_PER_SM": 2}' \
    --try 'moe_routed@T=64={"UP_EARLY_PER_SM": 4}' --json "$W/early.json"
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
