#!/usr/bin/env bash
# Session 33, call 3: issue 9's MoE table on the card this session got (an H100 in calls 1-2), graph replay, the
# Flash TP8 rank shapes at C = 1 / 16 / 64, and the copy ceiling on the same card.
#   run(command="KB_TOTAL_S=200 KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session33b.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-200}
source scripts/device_lib.sh || exit 1
step copy 60 $KB calibrate --measure copy_gbps
step moe 150 $KB bench moe_layer moe_experts --impl triton --shapes flash-tp8 --batch 1 --batch 16 --batch 64 --max-time 0.3
finish
