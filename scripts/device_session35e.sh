#!/usr/bin/env bash
# Session 35, call 6: fp8_linear at 8 MB / 64 tokens against its three-launch v1 path (act-quant, GEMM, split-K reduce)
# and two more v2 tiles; the 43-layer step launch by launch at C = 64 on the H200 (one stream, no PDL: issue 17's table).
#   run(command="KB_TOTAL_S=200 KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session35e.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-200}
source scripts/device_lib.sh || exit 1
step fp8_v1 60 $KB bench fp8_linear --impl triton --shapes flash-tp8 --where M=64 --where N=2048,4096 \
    --where K=4096,2048 --max-time 0.2 --json "$W/fp8_v1.json" \
    --try 'fp8_linear@M=64={"PATH": "v1", "BM": 64, "BN": 64, "SPLIT": 8, "num_warps": 8, "num_stages": 3}' \
    --try 'fp8_linear@M=64={"PATH": "v2", "NB": 1, "X_OPERAND": "B", "BM": 64, "BN": 128, "SPLIT": 4, "num_warps": 8, "num_stages": 4}' \
    --try 'fp8_linear@M=64={"PATH": "v2", "NB": 1, "X_OPERAND": "B", "BM": 32, "BN": 128, "SPLIT": 2, "num_warps": 8, "num_stages": 4}'
export KERNELBENCH_PDL=0
step kernels64 100 $KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 64 \
    --overlap none --kernels --json "$W/kernels64.json"
finish
