#!/usr/bin/env bash
# Session 51's last call: issue 9's table beside the triton_kernels peer at the tree with GATE_TOPK_ROWS 1 (the copy
# ceiling first; carry .gpu_peers), then its "done when" verify, on whatever card comes (the issue names the H200;
# sessions 47-51 got only H100s).
#   run(command="KB_TOTAL_S=400 KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session51c.sh", carry=[".whl", ".gpu_peers"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-400}
source scripts/device_lib.sh || exit 1
step copy 30 $KB calibrate --measure copy_gbps
step issue9 150 $KB bench moe_layer moe_experts --impl triton --impl triton_kernels --shapes flash-tp8 \
    --max-time 0.3 --json "$W/issue9.json"
step verify9 200 $KB verify moe_gate moe_experts shared_expert moe_layer --impl triton --device cuda \
    --shapes flash-tp8 --examples 3
finish
