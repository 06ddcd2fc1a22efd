#!/usr/bin/env bash
# Session 26, call 3: ROW_REGS 16384 as the default (the held select in the smallest of four block sizes that holds
# the row: 2048 / 4096 / 8192 / 16384). (1) the indexer GPU tests; (2) GPU verify of csa_indices and indexer_topk at
# the long-context set (the radix select stays a config of the space: ROW_REGS 0); (3) csa_indices and indexer_topk,
# the default beside the radix select (variant triton_radix), at 8K / 64K tokens for C = 1 / 16 / 64 and 1M for
# C = 1 / 16, and two top-k shapes (SCAN 8192; 8 warps, SCAN 2048) at 64K; (4) the scaling presets of indexer_topk (work must follow the context, not the capacity).
#   run(command="KB_TOTAL_S=470 KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session26c.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-470}
source scripts/device_lib.sh || exit 1
step gpu_tests 70 python3 -m pytest -q -rA -p no:cacheprovider -m gpu tests/test_indexer.py
step verify 80 $KB verify csa_indices indexer_topk --impl triton --device cuda --shapes flash-tp8-long \
    --examples 2 --time-budget 8
V="--impl triton --impl triton_radix --module scripts/attn_variants.py --shapes flash-tp8-long --max-time 0.2"
step long 110 $KB bench csa_indices indexer_topk $V --batch 1 --batch 16 --batch 64 --context 8192 \
    --context 65536 --json "$W/long.json"
step variants 50 $KB bench csa_indices --impl triton_sc8k --impl triton_tw8 --module scripts/attn_variants.py \
    --shapes flash-tp8-long --max-time 0.2 --batch 16 --batch 64 --context 65536 --json "$W/variants.json"
step million 50 $KB bench csa_indices $V --batch 1 --batch 16 --context 1048576 --json "$W/million.json"
step scaling 70 $KB scaling indexer_topk --impl triton --max-time 0.2 --json "$W/scaling.json"
finish
