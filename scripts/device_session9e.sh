#!/usr/bin/env bash
# Session 9's fifth H200 call (2026-12-02): the default's K split above 32 tokens (SPLIT_UP 2) checked in the 43-layer
# step at C = 64 against the same config without it (pinned), timed beside triton_v4 in one bench run, verified.
#   run(command="KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session9e.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-290}
source scripts/device_lib.sh || exit 1
NOSPLIT='{"BM": 8, "BN_UP": 64, "BN_DOWN": 64, "SPLIT_UP": 1, "SPLIT_DOWN": 1, "num_warps": 4, "num_stages": 3,
 "DECODE": "fp8_asm", "SHARED": "fused", "SCALES": "ahead", "SHARED_ITEMS": "per_tile", "GATE": "gemm",
 "MAXNREG_DOWN": 80, "BDIAG": true, "BM_SHARED": 16}'
step decode_split 60 $KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 64 \
    --json "$W/decode_split.json"
step decode_nosplit 60 env KERNELBENCH_PIN_CONFIG="moe_experts=$NOSPLIT" $KB decode-bench --device cuda --impl triton \
    --graph on --layers flash --batches 64 --json "$W/decode_nosplit.json"
step bench_moe 60 $KB bench moe_experts moe_layer --impl triton --impl triton_v4 --shapes flash-tp8 --batch 64 \
    --max-time 0.1 --target-rse 0.03 --max-sets 32 --run-tag session9e --json "$W/bench_moe.json"
step verify 80 sh -c "$KB verify moe_experts moe_layer --impl triton --device cuda --shapes flash-tp8 --examples 2 \
    --time-budget 3 --json > $W/verify.json"
finish
