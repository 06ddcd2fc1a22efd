#!/usr/bin/env bash
# Session 42, call 7: the defaults shipped this session (attention_front from 64 rows: BM 64 with its tails launched;
# attention_q from 2 to 16 rows: PATH "split") verified, then the 43-layer step with its attribution at C = 1 / 16 / 64
# (issue 17's per-layer measure). On an H200 also issue 9's table beside the peer (carry .gpu_peers) and the copy
# ceiling.
#   run(command="KB_TOTAL_S=420 KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session42g.sh",
#       carry=[".whl", ".gpu_peers"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-420}
source scripts/device_lib.sh || exit 1
step verify 40 $KB verify attention_front attention_q --impl triton --device cuda --shapes flash-tp8 --examples 1 \
    --time-budget 3 --where M=16,64
step step_attr 130 $KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 1,16,64 --profile \
    --json "$W/step_attr.json"
if grep -q "H200" "$W/environment.txt"; then
    step copy 30 $KB calibrate --measure copy_gbps
    step issue9 150 $KB bench moe_layer moe_experts --impl triton --impl triton_kernels --shapes flash-tp8 \
        --max-time 0.3 --json "$W/issue9.json"
fi
step_times step_attr
finish
