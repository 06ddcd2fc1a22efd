#!/usr/bin/env bash
# Session 33, call 7: moe_layer's GPU verify, which call 6 (device_session33d.sh) cut at its 80 s limit after moe_gate,
# moe_experts and shared_expert had passed.
#   run(command="KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session33e.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-140}
source scripts/device_lib.sh || exit 1
step verify_layer 125 $KB verify moe_layer --impl triton --device cuda --shapes flash-tp8 --examples 2 --time-budget 6
finish
