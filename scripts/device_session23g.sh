#!/usr/bin/env bash
# Session 23, call 7 (the budget's rest): wo_b at one token (fp8_linear M = 1 N = 4096 K = 1024, session 3's entry
# from a 2-trial tune) in the GEMV shape that won three times this session (NB 1, SPLIT 8; 4 warps as a candidate
# entry, kept if faster; 8 warps as a plain trial), 20 interleaved pairs at C = 1.
#   run(command="KB_TOTAL_S=120 KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session23g.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-120}
source scripts/device_lib.sh || exit 1
cp kernelbench/tuned/v1.json "$W/v1_kept.json"
step try 100 $KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 1 \
    --try-entries data/h200-2026-12-04-session23/call7/candidates.json --keep-faster "$W/v1_kept.json" \
    --try 'fp8_linear@M=1@N=4096@K=1024={"BM":1,"BN":64,"NB":1,"PATH":"v2","SPLIT":8,"X_OPERAND":"B","num_stages":1,"num_warps":8}' \
    --json "$W/try.json"
finish
