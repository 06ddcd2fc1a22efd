#!/usr/bin/env bash
# helper dispatch (issue 17), mid-session H200 call (<= 75 s): the path choice (PATH) of the `triton` fp8_linear,
# compressor_step and indexer_q, and the shared GEMM + head-ticket prologue of attention_q / indexer_q (D1).
# Runs from the repository root with device_env.sh sourced and KERNELBENCH_DB set by the runner; writes $OUT/dispatch/.
# 1. verify (needed first: `tune` exports only configs whose code path has a passing verify in the same database);
# 2. tune the three ops at flash-tp8 C = 1, 16, 64, a small sample per shape (the default, the nearest config of every
#    other PATH / X_OPERAND value, one random), exporting into a copy of kernelbench/tuned/v1.json.
mkdir -p "$OUT/dispatch"
T0=$(date +%s)
KB="python3 -m kernelbench"
export KERNELBENCH_QUIET_TUNING=1
cp kernelbench/tuned/v1.json "$OUT/dispatch/tuned_v1.json"
timeout -k 5 38 $KB verify attention_q indexer_q compressor_step fp8_linear --impl triton --device cuda \
    --shapes flash-tp8 --examples 3 --time-budget 2 > "$OUT/dispatch/verify.log" 2>&1
echo "verify rc=$? t=$(( $(date +%s) - T0 ))s" | tee -a "$OUT/dispatch/status.txt"
tail -n 30 "$OUT/dispatch/verify.log"
LEFT=$(( 72 - ($(date +%s) - T0) ))
timeout -k 3 "$LEFT" $KB tune compressor_step indexer_q fp8_linear --impl triton --shapes flash-tp8 --batch 1 \
    --batch 16 --batch 64 --max-trials 2 --top-k 2 --rounds 1 --budget $(( LEFT - 6 )) --trial-timeout 20 \
    --no-isolate --no-sm120-check --export "$OUT/dispatch/tuned_v1.json" > "$OUT/dispatch/tune.log" 2>&1
echo "tune rc=$? t=$(( $(date +%s) - T0 ))s" | tee -a "$OUT/dispatch/status.txt"
tail -n 40 "$OUT/dispatch/tune.log"
