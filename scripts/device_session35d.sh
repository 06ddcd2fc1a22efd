#!/usr/bin/env bash
# Session 35, call 5: call 4's Nsight had fp8_linear at M = 64, N = 2048, K = 4096 (its tuned H200 entry: BM 32, BN 128,
# SPLIT 4, 8 warps) as 128 programs on 132 SMs, 12% achieved occupancy, 14% of DRAM peak, stalls on the per-K-block
# wgmma wait and the split-K ticket. Do more, smaller programs stream faster? bench --try at the 8 MB shapes.
#   run(command="KB_TOTAL_S=200 KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session35d.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-200}
source scripts/device_lib.sh || exit 1
v2='"PATH": "v2", "NB": 1, "X_OPERAND": "B"'
step fp8_try 170 $KB bench fp8_linear --impl triton --shapes flash-tp8 --where M=64 --where N=2048,4096 \
    --where K=4096,2048 --max-time 0.2 --json "$W/fp8_try.json" \
    --try "fp8_linear@M=64={$v2, \"BM\": 64, \"BN\": 64, \"SPLIT\": 8, \"num_warps\": 4, \"num_stages\": 3}" \
    --try "fp8_linear@M=64={$v2, \"BM\": 64, \"BN\": 32, \"SPLIT\": 8, \"num_warps\": 4, \"num_stages\": 3}" \
    --try "fp8_linear@M=64={$v2, \"BM\": 64, \"BN\": 64, \"SPLIT\": 16, \"num_warps\": 4, \"num_stages\": 2}" \
    --try "fp8_linear@M=64={$v2, \"BM\": 32, \"BN\": 64, \"SPLIT\": 8, \"num_warps\": 4, \"num_stages\": 3}" \
    --try "fp8_linear@M=64={$v2, \"BM\": 64, \"BN\": 128, \"SPLIT\": 16, \"num_warps\": 8, \"num_stages\": 3}"
finish
