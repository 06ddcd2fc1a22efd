#!/usr/bin/env bash
# Session 8's fourth H200 call (2026-12-02): the shipped default of indexer_topk (SEGMENTS "auto": the split top-k
# where the cache can hold a long row, 4096 / 16384 scores per segment at T <= 4 / above) beside the one-program
# top-k (the default before, variant triton_one) at 512 / 8K / 64K / 1M tokens and C = 1 / 16 / 64, and the GPU
# verify of the default at the long-context shape set (the split path runs there: capacity >= 2 segments).
#   run(command="KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session8d.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-290}
source scripts/device_lib.sh || exit 1
step calibrate 15 $KB calibrate --measure copy_gbps
step bench_topk 175 $KB bench indexer_topk --impl triton --impl triton_one --module scripts/attn_variants.py \
    --shapes flash-tp8-long --batch 1 --batch 16 --batch 64 --context 512 --context 65536 --context 1048576 \
    --context 8192 --max-time 0.05 --target-rse 0.03 --max-sets 4 --json "$W/bench_topk.json"
step verify_long 70 sh -c "$KB verify indexer_topk --impl triton --device cuda --shapes flash-tp8-long \
    --case-values all --examples 2 --time-budget 5 --json > $W/verify_long.json"
finish
