#!/usr/bin/env bash
# Session 8's first H200 call (2026-12-02): (1) the indexer's segmented top-k (SEGMENTS 4 / 16 / 64, CPU-exact, never
# timed on a GPU) beside the default single-program top-k at 8K / 64K / 1M tokens of context; (2) the GPU verify of
# the kernels refactored in session 6 and never run on a GPU since: mHC triton_v3 (and mhc_head triton_v4), MoE
# triton_v2 / triton_v3 / triton_glue2 / triton_glue3 (shared pair_codes_e4m3 / _pair_dots); (3) their GPU tests.
#   run(command="KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session8.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-500}
source scripts/device_lib.sh || exit 1
step calibrate 15 $KB calibrate --measure copy_gbps
step bench_topk 150 $KB bench indexer_topk --impl triton --impl triton_seg4 --impl triton_seg16 --impl triton_seg64 \
    --module scripts/attn_variants.py --shapes flash-tp8-long --batch 1 --batch 16 --batch 64 --context 8192 \
    --context 65536 --context 1048576 --max-time 0.1 --target-rse 0.03 --max-sets 8 --json "$W/bench_topk.json"
step verify_mhc 90 sh -c "$KB verify mhc_pre mhc_post_pre mhc_post_pre_norm mhc_head --impl triton_v3 --impl triton_v4 \
    --device cuda --shapes flash-tp8 --examples 2 --time-budget 3 --json > $W/verify_mhc.json"
step verify_moe 150 sh -c "$KB verify moe_experts moe_layer --impl triton_v2 --impl triton_v3 --impl triton_glue2 \
    --impl triton_glue3 --device cuda --shapes flash-tp8 --examples 1 --time-budget 2 --json > $W/verify_moe.json"
step gpu_tests 90 python3 -m pytest -q -p no:cacheprovider -o addopts="" -m gpu tests/test_moe.py tests/test_mhc.py
finish
