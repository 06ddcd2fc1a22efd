#!/usr/bin/env bash
# Session 33, call 4: the 43-layer Flash TP8 rank step (context 512, graph replay, C = 1 / 16 / 64) on the card this
# session got (an H100), with the per-op attribution, so issue 9 / 17's step numbers exist for this card too.
#   run(command="KB_TOTAL_S=220 KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session33c.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-220}
source scripts/device_lib.sh || exit 1
step decode_flash 200 $KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 1,16,64 \
    --profile --json "$W/decode_flash.json"
step_times decode_flash
finish
