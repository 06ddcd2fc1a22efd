#!/usr/bin/env bash
# The integrated GPU call of the fifth 2026-12-01 session (issues 9 and 17): verify of every op changed this
# session on the H200 at Flash TP8 shapes (MoE gate and GEMM configs, the mHC kernels, the per-shape code paths of
# fp8_linear / compressor_step / indexer_q and the attention_q / indexer_q shared prologue), the 43-layer decode
# step with per-op attribution, new vs previous kernels in the same run (the previous ones stay registered), the
# GPU tests of the changed families.
#   run(command="KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session5.sh", carry=[".whl", ".gpu_peers"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-560}
source scripts/device_lib.sh || exit 1
T="--max-time 0.1 --target-rse 0.03 --max-sets 32 --run-tag session5"
OPS="moe_gate moe_experts shared_expert moe_layer fp8_linear compressor_step indexer_q attention_q \
    mhc_pre mhc_post_pre mhc_post_pre_norm"
step calibrate 15 $KB calibrate --measure copy_gbps
step decode_flash 100 $KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 1,16,64 --profile \
    --json "$W/decode_flash.json"
step verify 170 sh -c "$KB verify $OPS --impl triton --device cuda --shapes flash-tp8 --examples 3 --time-budget 3 \
    --json > $W/verify.json"
step bench_moe 60 $KB bench moe_layer moe_experts moe_gate --impl triton --impl triton_v3 --impl triton_v1 \
    --impl triton_kernels --shapes flash-tp8 --batch 1 --batch 16 --batch 64 $T --json "$W/bench_moe.json"
step bench_rest 75 $KB bench mhc_post_pre_norm compressor_step indexer_q fp8_linear --impl triton --impl triton_v1 \
    --impl triton_v2 --shapes flash-tp8 --batch 1 --batch 64 $T --json "$W/bench_rest.json"
step gpu_tests 80 python3 -m pytest -q -p no:cacheprovider -o addopts="" -m gpu tests/test_moe.py tests/test_mhc.py \
    tests/test_linear.py tests/test_compressor.py tests/test_indexer.py tests/test_front.py tests/test_decode_bench.py
finish
