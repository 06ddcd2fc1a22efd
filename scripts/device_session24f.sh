#!/usr/bin/env bash
# Session 24, call 6 (the last of the session): issue 9's table re-measured at this commit (moe_layer and moe_experts,
# graph replay, Flash TP8 rank shapes, C = 1 / 16 / 64; % of copy against this machine's copy ceiling, calibrated in
# the same call) and the MoE verify that call 4's limit cut in moe_routed, moe_routed and moe_layer alone here. The
# triton_kernels peer is not in this run: its source could not be brought to this machine this session (the
# repository snapshot is 842 MB, over the 500 MB fetch limit); its last side-by-side table is session 9's.
#   run(command="KB_TOTAL_S=300 KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session24f.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-300}
source scripts/device_lib.sh || exit 1
step calibrate 30 $KB calibrate --measure copy_gbps
step bench 100 $KB bench moe_layer moe_experts --impl triton --shapes flash-tp8 --max-time 0.3 --json "$W/bench.json"
step verify 140 $KB verify moe_routed moe_layer --impl triton --device cuda --shapes flash-tp8 --examples 2 \
    --time-budget 5
finish
