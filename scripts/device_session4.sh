#!/usr/bin/env bash
# The integrated GPU call of the fourth 2026-12-01 session (issues 9 and 17): verify of every op changed this
# session on the H200 at Flash TP8 shapes, the full 43-layer decode step with per-op attribution and launches per
# layer, new vs previous kernels side by side (the previous ones stay registered as impls), and the GPU tests.
#   run(command="KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session4.sh", carry=[".whl", ".gpu_peers"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-560}
source scripts/device_lib.sh || exit 1
T="--max-time 0.1 --target-rse 0.03 --max-sets 32 --run-tag session4"
OPS="moe_gate moe_experts shared_expert moe_layer fp8_linear bf16_linear grouped_wo_a lm_head attention_front attention_q \
    sparse_attention indexer_topk attention_indices compressor_step indexer_q"
step calibrate 15 $KB calibrate --measure copy_gbps
step verify 170 sh -c "$KB verify $OPS --impl triton --device cuda --shapes flash-tp8 --examples 3 --time-budget 3 \
    --json > $W/verify.json"
step decode_flash 120 $KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 1,16,64 --profile \
    --json "$W/decode_flash.json"
step bench_moe 60 $KB bench moe_experts moe_layer --impl triton --impl triton_v2 --impl triton_kernels --shapes flash-tp8 \
    --batch 1 --batch 16 --batch 64 $T --json "$W/bench_moe.json"
step bench_rest 75 $KB bench fp8_linear grouped_wo_a bf16_linear compressor_step indexer_q --impl triton --impl triton_v1 \
    --impl triton_v2 --shapes flash-tp8 --batch 1 --batch 64 $T --json "$W/bench_rest.json"
step bench_cublas 25 $KB bench fp8_linear --shapes flash-tp8 --batch 16 --impl triton --impl triton_v1 --impl torch_bf16 \
    --module scripts/cublas_peer.py $T --json "$W/bench_cublas.json"
step gpu_tests 75 python3 -m pytest -q -p no:cacheprovider -o addopts="" -m gpu tests
finish
