#!/usr/bin/env bash
# Session 12, call 4: the record after this session's changes (the two-launch ratio-4 compressor entries at T = 1):
# the 43-layer Flash step at C = 1 / 16 / 64 with its per-kernel table, and issue 9's op table (moe_layer,
# moe_experts, moe_routed at C = 1 / 16 / 64) with the copy-bandwidth ceiling measured in the same call.
#   run(command="KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session12d.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-420}
source scripts/device_lib.sh || exit 1
step calibrate 40 $KB calibrate
step decode 200 $KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 1,16,64 --kernels \
    --json "$W/decode.json"
step bench 150 $KB bench moe_layer moe_experts moe_routed --impl triton --shapes flash-tp8 --batch 1 --batch 16 \
    --batch 64 --max-time 0.3 --json "$W/bench.json"
finish
