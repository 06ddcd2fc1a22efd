#!/usr/bin/env bash
# Prepared in session 23 for the next session (not yet run): (1) lm_head verified on the GPU so that its T = 16 / 64
# tune can export (session 23 call 1 chose SPLIT-false configs, 34.72 / 59.78 us, refused for want of a GPU
# verification in the same store); (2) sparse attention at one token for the swa rows (Ksel 128), which borrow the
# csa row's (Ksel 640) entry (the step's hca rows, Ksel 133, have no flash-tp8 case of that width: the hca case at
# context 512 is Ksel 135, so its export would match no lookup of the step); both tuned alone, then judged in the step, the faster ones kept in
# $W/v1_kept.json (copy into kernelbench/tuned/v1.json after reading the verdicts); (3) the indexer's head-weight GEMV
# at one token (bf16_linear M = 1 N = 64, side lane) in the GEMV shape that won four times in session 23 (NB 1, the
# widest split, 4 warps), as a plain trial; (4) the indexer query at one token in ONE launch with that GEMV shape
# (PATH fused, BM 1: the GEMV, then RoPE + Hadamard + FP4 by each head's last program; session 23 call 2 tried PATH
# fused only with the 16-row tile, 0.022 ms slower): it sits on the path the csa layers' sparse attention waits on.
#   run(command="KB_TOTAL_S=540 KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session24a.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-540}
source scripts/device_lib.sh || exit 1
step verify 100 $KB verify lm_head sparse_attention --impl triton --device cuda --shapes flash-tp8 --examples 2 \
    --time-budget 5
# session 23's review refactor (window_slots, check_window, _checked) and the wo_b entry, not yet verified on a GPU
step verify2 80 $KB verify csa_indices attention_indices indexer_topk fp8_linear --impl triton --device cuda \
    --shapes flash-tp8 --examples 2 --time-budget 5
TUNE="$KB tune --shapes flash-tp8 --impl triton --max-trials 12 --top-k 3 --rounds 2 --trial-timeout 20 --export $W/tuned.json"
step tune_lm 90 $TUNE lm_head --where T=16,64 --budget 55
step tune_attn 80 $TUNE sparse_attention --where T=1 --where kind=swa --budget 45
cp kernelbench/tuned/v1.json "$W/v1_kept.json"
TRY=()
if [ -f "$W/tuned.json" ]; then TRY=(--try-entries "$W/tuned.json" --keep-faster "$W/v1_kept.json"); fi
step try 150 $KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 1,16,64 "${TRY[@]}" \
    --try 'bf16_linear@M=1@N=64@K=4096={"BM":1,"BN":64,"NB":1,"SPLIT":32,"num_warps":4,"num_stages":1}' \
    --try 'indexer_q@T=1@Hi=64={"BM":1,"BN":64,"NB":1,"SPLIT":8,"num_warps":4,"num_stages":1,"RB":16,"PATH":"fused","EPI_WARPS":2}' \
    --try 'indexer_q@T=1@Hi=64={"BM":1,"BN":64,"NB":1,"SPLIT":8,"num_warps":8,"num_stages":1,"RB":16,"PATH":"fused","EPI_WARPS":2}' \
    --json "$W/try.json"
finish
