#!/usr/bin/env bash
# Session 9's sixth H200 call (2026-12-02): the 43-layer step at C = 64 with the MoE default (SPLIT_UP 2 above 32
# tokens) and with it pinned to the same config without the split, alternately (split, no split, split).
#   run(command="KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session9f.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-150}
source scripts/device_lib.sh || exit 1
NOSPLIT='{"BM": 8, "BN_UP": 64, "BN_DOWN": 64, "SPLIT_UP": 1, "SPLIT_DOWN": 1, "num_warps": 4, "num_stages": 3,
 "DECODE": "fp8_asm", "SHARED": "fused", "SCALES": "ahead", "SHARED_ITEMS": "per_tile", "GATE": "gemm",
 "MAXNREG_DOWN": 80, "BDIAG": true, "BM_SHARED": 16}'
D="$KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 64 --no-store"
step split_a 45 $D --json "$W/split_a.json"
step nosplit 45 env KERNELBENCH_PIN_CONFIG="moe_experts=$NOSPLIT" $D --json "$W/nosplit.json"
step split_b 45 $D --json "$W/split_b.json"
finish
