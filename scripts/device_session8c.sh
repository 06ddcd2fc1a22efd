#!/usr/bin/env bash
# Session 8's third H200 call (2026-12-02): the split top-k with its second merge bound (min over segments of their
# ceil(K / a)-th key) and a wider filter, beside the one-program top-k, at 512 / 8K / 64K / 1M tokens and C = 1 / 16 /
# 64; at 512 tokens also with 2 programs per token (what the idle programs of the split launch cost); its GPU verify.
#   run(command="KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session8c.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-300}
source scripts/device_lib.sh || exit 1
step calibrate 15 $KB calibrate --measure copy_gbps
step bench_topk 170 $KB bench indexer_topk --impl triton --impl triton_split --module scripts/attn_variants.py \
    --shapes flash-tp8-long --batch 1 --batch 16 --batch 64 --context 512 --context 65536 --context 1048576 \
    --context 8192 --max-time 0.05 --target-rse 0.03 --max-sets 4 --json "$W/bench_topk.json"
step bench_s2 40 $KB bench indexer_topk --impl triton_split_s2 --module scripts/attn_variants.py \
    --shapes flash-tp8-long --batch 1 --batch 64 --context 512 --max-time 0.05 --target-rse 0.03 --max-sets 4 \
    --json "$W/bench_s2.json"
step verify_split 50 sh -c "$KB verify indexer_topk --impl triton_split --kernel-module scripts/attn_variants.py \
    --device cuda --shapes flash-tp8 --case-values all --examples 3 --time-budget 5 --json > $W/verify_split.json"
finish
