#!/usr/bin/env bash
# Session 9's second H200 call (2026-12-02): the new MoE default (BDIAG, slot tiles of 8, the shared expert's token
# tile 16) in the 43-layer Flash step at C = 1 / 16 / 64 (per-op attribution after all timing), timed beside the
# previous default (impl triton_v4) and the triton_kernels matmul_ogs peer in one bench run, then verified on the GPU
# (moe_experts, moe_layer at flash-tp8) and the GPU-marked MoE tests.
#   run(command="KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session9b.sh", carry=[".whl", ".gpu_peers"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-500}
source scripts/device_lib.sh || exit 1
T="--max-time 0.1 --target-rse 0.03 --max-sets 32 --run-tag session9"
step calibrate 15 $KB calibrate --measure copy_gbps
step decode_flash 140 $KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 1,16,64 \
    --profile --json "$W/decode_flash.json"
step bench_moe 160 $KB bench moe_experts moe_layer --impl triton --impl triton_v4 --impl triton_kernels \
    --shapes flash-tp8 --batch 64 --batch 16 --batch 1 $T --json "$W/bench_moe.json"
step verify 120 sh -c "$KB verify moe_experts moe_layer --impl triton --device cuda --shapes flash-tp8 --examples 2 \
    --time-budget 3 --json > $W/verify.json"
step gpu_tests 45 python3 -m pytest -q -p no:cacheprovider -o addopts="" -m gpu tests/test_moe.py
finish
