#!/usr/bin/env bash
# Session 44, first call: (1) `kernelbench verify` of attention_front's shipped default by name at the flash shapes' 16
# and 64 tokens (session 43 shipped XQ "gemm" on its 16-row tail tile and could run it on the GPU only as the bit
# test's configuration); (2) on an H200, issue 9's table beside the triton_kernels peer and the copy ceiling (carry
# .gpu_peers); (3) the 43-layer step with --profile at C = 1 / 16 / 64: the per-op attribution of the tree as shipped,
# the before of this session's kernel work.
#   run(command="KB_TOTAL_S=330 KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session44a.sh",
#       carry=[".whl", ".gpu_peers"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-330}
source scripts/device_lib.sh || exit 1
step verify_front 60 $KB verify attention_front --impl triton --device cuda --shapes flash-tp8 --where M=16,64 \
    --time-budget 20
if grep -q "H200" "$W/environment.txt"; then
    step copy 30 $KB calibrate --measure copy_gbps
    step issue9 150 $KB bench moe_layer moe_experts --impl triton --impl triton_kernels --shapes flash-tp8 \
        --max-time 0.3 --json "$W/issue9.json"
fi
step profile 120 $KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 1,16,64 --steps 30 \
    --profile --json "$W/profile.json"
step_times profile
finish
