#!/usr/bin/env bash
# Session 8's second H200 call (2026-12-02): the split top-k (`_index_topk_split`: one launch, up to ~4 programs per
# SM, the last of a token's segments merging only the candidates that can still be in the top-k) beside the
# one-program top-k (impl "triton", SEGMENTS 1) at 512 / 8K / 64K / 1M tokens of context and C = 1 / 16 / 64, plus
# its GPU verify (ties across segments included in the drawn examples' value modes).
#   run(command="KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session8b.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-330}
source scripts/device_lib.sh || exit 1
step calibrate 15 $KB calibrate --measure copy_gbps
step verify_split 60 sh -c "$KB verify indexer_topk --impl triton_split --impl triton_split2k \
    --kernel-module scripts/attn_variants.py --device cuda --shapes flash-tp8 --case-values all --examples 3 \
    --time-budget 5 --json > $W/verify_split.json"
step bench_topk 230 $KB bench indexer_topk --impl triton --impl triton_split --impl triton_split2k \
    --module scripts/attn_variants.py --shapes flash-tp8-long --batch 1 --batch 16 --batch 64 --context 512 \
    --context 65536 --context 1048576 --context 8192 --max-time 0.05 --target-rse 0.03 --max-sets 4 \
    --json "$W/bench_topk.json"
finish
