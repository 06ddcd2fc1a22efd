#!/usr/bin/env bash
# Session 8's fifth H200 call (2026-12-02): GPU verify of indexer_topk's config paths after the split top-k's merge
# joined the covering set (SEGMENTS 4, SEG_MIN 4: the merge at the flash-tp8 cases' 128-score rows), for impl
# "triton" and its first version triton_v1 (32-bit keys); and the MoE X_ONCE switch (opt-in, not in the space)
# replayed at the flash-tp8 C = 16 and 64 cases against the reference.
#   run(command="KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session8e.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-140}
source scripts/device_lib.sh || exit 1
step verify_topk 60 sh -c "$KB verify indexer_topk --impl triton --impl triton_v1 --device cuda --shapes flash-tp8 \
    --case-values all --examples 2 --time-budget 4 --json > $W/verify_topk.json"
P='"D":4096,"E":256,"El":32,"F":2048,"K":6,"V":8192,"hash":false,"offset":96,"rs":1.5'
C='"BM":16,"BN_UP":64,"BN_DOWN":64,"num_warps":4,"num_stages":3,"DECODE":"fp8_asm","SHARED":"fused","SCALES":"ahead","SHARED_ITEMS":"per_tile","GATE":"gemm","X_ONCE":true'
step xonce_16 30 $KB verify moe_experts --impl triton --device cuda --params "{$P,\"T\":16}" --values normal \
    --seed 0 --config "{$C,\"SPLIT_UP\":4,\"SPLIT_DOWN\":2}"
step xonce_64 30 $KB verify moe_experts --impl triton --device cuda --params "{$P,\"T\":64}" --values normal \
    --seed 0 --config "{$C,\"SPLIT_UP\":1,\"SPLIT_DOWN\":1}"
finish
