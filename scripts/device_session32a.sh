#!/usr/bin/env bash
# Session 32, after call 1 (scripts/device_session31a.sh) and call 2 (30d.sh). (1) The indexer's GPU tests with
# session 31's packed-terms test mended (it compared sorted score lists, which a one-ulp move reorders; now key by
# key); (2) the whole GPU suite at the working tree (session 31's kernel changes and session 32's HEAD_MMA had no run
# of it); (3) the score launch's occupancy in the 64K step. Its default (BLOCK_S 128, 4 warps, 3 stages) holds
# 114,944 B of shared memory: two programs (8 warps) an SM on the H200, and session 29's profile stalls on fixed
# latencies and issue. HEAD_MMA (one more tensor-core round trip a block) measured slower in call 1, which a
# latency-bound loop would explain. Paired trials at C = 1 / 64 of fewer stages and smaller blocks (sm_90 static:
# BLOCK_S 64 / 4 warps / 3 stages 65,664 B, 3 programs an SM; 64 / 8 / 2 49,664 B, 4 programs, 32 warps), 30 pairs.
#   run(command="KB_TOTAL_S=350 KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session32a.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-350}
source scripts/device_lib.sh || exit 1
step gpu_indexer 45 python3 -m pytest -q -m gpu tests/test_indexer.py
step trial 140 $KB decode-bench --device cuda --impl triton --graph on --layers flash --context 65536 \
    --batches 1,64 --steps 30 --try 'csa_indices={"num_stages": 2}' --try 'csa_indices={"num_warps": 8}' \
    --try 'csa_indices={"BLOCK_S": 64, "num_warps": 8}' \
    --try 'csa_indices={"BLOCK_S": 64, "num_warps": 8, "num_stages": 2}' --json "$W/trial.json"
step_times trial
step gpu_all 150 python3 -m pytest -q -m gpu tests --ignore=tests/test_indexer.py
finish
