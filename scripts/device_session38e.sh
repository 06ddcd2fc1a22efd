#!/usr/bin/env bash
# Not run: no H200 came before session 38's device time ran out (next session's). Meant for an H200: the 43-layer
# step with its attribution at C = 1 / 16 / 64 (issue 17's non-MoE time a layer, last measured on an H200 in session
# 25: 42.4 us at C = 1); fp8_linear's PREFETCH "staged" over the step's own fp8_linear keys at 16 / 64 tokens (over
# each key's tuned entry) in interleaved pairs (on an H100, session 36: 0.018 ms slower at C = 16, within noise at
# 64; never timed on an H200); issue 9's table beside the triton_kernels peer (carry .gpu_peers).
#   run(command="KB_TOTAL_S=420 KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session38e.sh", carry=[".whl", ".gpu_peers"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-420}
source scripts/device_lib.sh || exit 1
step copy 25 $KB calibrate --measure copy_gbps
step step_attr 120 $KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 1,16,64 --profile \
    --json "$W/step_attr.json"
step step_staged 120 $KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 16,64 \
    --steps 30 --try 'fp8_linear@M=16,64={"PREFETCH": "staged"}' --json "$W/step_staged.json"
step moe_table 130 $KB bench moe_layer moe_experts --impl triton --impl triton_kernels --shapes flash-tp8 \
    --max-time 0.3 --json "$W/moe_table.json"
finish
