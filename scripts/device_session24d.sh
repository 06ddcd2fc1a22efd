#!/usr/bin/env bash
# Session 24, call 4 (the last): the shipped state on the GPU. (1) The whole GPU test suite (pytest -m gpu: every
# test that skips on the CPU, the A/A control's tests of --try and --ablate-tuned included); (2) issue 9's "done
# when" verify of the MoE ops; (3) the 43-layer step once as it ships (C = 1 / 16 / 64).
#   run(command="KB_TOTAL_S=480 KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session24d.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-480}
source scripts/device_lib.sh || exit 1
step final 70 $KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 1,16,64 \
    --json "$W/final.json"
step_times final
step verify 110 $KB verify moe_gate moe_experts shared_expert moe_layer moe_routed --impl triton --device cuda \
    --shapes flash-tp8 --examples 2 --time-budget 5
step gpu_tests 280 python3 -m pytest -q -rA -p no:cacheprovider -m gpu tests
finish
