#!/usr/bin/env bash
# Session 25, call 5 (the last): numbers for the closing note at this commit. (1) The step on one stream without PDL,
# per launch (--kernels): issue 17's per-layer split at C = 1 (session 21's table is the last one). (2) Issue 17's
# per-op goals at long context: copy bandwidth, then sparse_attention and csa_indices at C = 64, 64K tokens
# (70% of copy is the goal; % roof in the table is against the copy rate measured in the same call).
#   run(command="KB_TOTAL_S=360 KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session25e.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-360}
source scripts/device_lib.sh || exit 1
KERNELBENCH_PDL=0 step serial 150 $KB decode-bench --device cuda --impl triton --graph on --layers flash \
    --batches 1,16,64 --overlap none --kernels --json "$W/serial.json"
step_times serial
step calibrate 30 $KB calibrate --measure copy_gbps
step long 150 $KB bench sparse_attention csa_indices --impl triton --shapes flash-tp8-long --batch 64 \
    --context 65536 --max-time 0.1 --json "$W/long.json"
finish
