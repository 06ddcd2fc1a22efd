#!/usr/bin/env bash
# Session 26, call 2: the FAST top-k with the row held in registers (config ROW_REGS, kernels/indexer.py
# _select_held: one read of the row, its k-th key by a binary search on counts instead of two radix-histogram passes
# over it). (1) the indexer GPU tests (held == radix bit for bit at 16384-score rows); (2) csa_indices at long context,
# the default beside the ROW_REGS / 32-warp variants (scripts/attn_variants.py), every output rechecked; (3) 1M tokens
# at C = 1 (the split top-k's segments of 4096 held).
#   run(command="KB_TOTAL_S=330 KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session26b.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-330}
source scripts/device_lib.sh || exit 1
step gpu_tests 90 python3 -m pytest -q -rA -p no:cacheprovider -m gpu tests/test_indexer.py
V="--impl triton --impl triton_held16k --impl triton_held32k --impl triton_tw32 --impl triton_held16k_tw32"
step long 150 $KB bench csa_indices $V --module scripts/attn_variants.py --shapes flash-tp8-long --batch 1 \
    --batch 16 --batch 64 --context 65536 --max-time 0.3 --json "$W/long.json"
step million 60 $KB bench csa_indices --impl triton --impl triton_held4k --impl triton_held16k \
    --module scripts/attn_variants.py --shapes flash-tp8-long --batch 1 --context 1048576 --max-time 0.3 \
    --json "$W/million.json"
finish
