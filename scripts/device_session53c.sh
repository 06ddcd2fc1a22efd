#!/usr/bin/env bash
# Session 53's third call: the ops that read wo_a as FP8 verified on the GPU, then the 64-token tile on the codes (call 3:
# 9.96 us against 8.81 on bf16 with the H200-tuned 32 x 64 tile, which converts each weight tile twice): wider tiles
# as trials beside the bf16 form, alone and in the 43-layer step at C = 64 (paired trials).
#   run(command="KB_TOTAL_S=330 KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session53c.sh", carry=[".whl", ".gpu_peers"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-330}
source scripts/device_lib.sh || exit 1
step verify_woa 60 $KB verify grouped_wo_a --impl triton --device cuda --shapes flash-tp8 --examples 2
step verify_attn_woa 80 $KB verify sparse_attention_wo_a --impl triton --device cuda --shapes flash-tp8 \
    --where ctx=512 --examples 2
BM64='{"BM": 64, "BN": 64, "SPLIT": 8, "num_warps": 8, "num_stages": 3}'
BM64_N32='{"BM": 64, "BN": 32, "SPLIT": 8, "num_warps": 4, "num_stages": 4}'
BM32_S8='{"BM": 32, "BN": 64, "SPLIT": 8, "num_warps": 8, "num_stages": 3}'
step bench_mma 60 $KB bench grouped_wo_a --impl triton --impl triton_bf16 --shapes flash-tp8 --where T=64 \
    --max-time 0.3 --try "grouped_wo_a@T=64=$BM64" --try "grouped_wo_a@T=64=$BM64_N32" \
    --try "grouped_wo_a@T=64=$BM32_S8" --json "$W/bench_mma.json"
step step_mma 130 $KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 64 --steps 30 \
    --try "grouped_wo_a@T=64=$BM64" --try "grouped_wo_a@T=64=$BM64_N32" --json "$W/step_mma.json"
finish
