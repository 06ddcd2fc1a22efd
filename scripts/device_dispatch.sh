#!/usr/bin/env bash
# helper dispatch (issue 17), second mid-session H200 call (<= 75 s). Runs from the repository root with
# device_env.sh sourced and KERNELBENCH_DB set by the runner; writes $OUT/dispatch/. Most important first.
# 1. D1 (attention_q / indexer_q share fp8_tile_head_ticket): verify both on the real shapes;
# 2. verify the PATH values of compressor_step, indexer_q, fp8_linear (config paths; no real cases: the first call's
#    verify spent its 38 s on the real cases), so `tune` may export choices of every path;
# 3. tune indexer_q then fp8_linear at flash-tp8 C = 1, 16, 64 (the default and the nearest config of every other
#    PATH / X_OPERAND value per shape), exporting into a copy of kernelbench/tuned/v1.json.
mkdir -p "$OUT/dispatch"
T0=$(date +%s)
KB="python3 -m kernelbench"
export KERNELBENCH_QUIET_TUNING=1
cp kernelbench/tuned/v1.json "$OUT/dispatch/tuned_v1.json"
timeout -k 3 20 $KB verify attention_q indexer_q --impl triton --device cuda --shapes flash-tp8 --examples 3 \
    > "$OUT/dispatch/verify_d1.log" 2>&1
echo "verify_d1 rc=$? t=$(( $(date +%s) - T0 ))s" | tee -a "$OUT/dispatch/status.txt"
tail -n 22 "$OUT/dispatch/verify_d1.log"
timeout -k 3 22 $KB verify indexer_q compressor_step fp8_linear --impl triton --device cuda --shapes none \
    --examples 1 > "$OUT/dispatch/verify_paths.log" 2>&1
echo "verify_paths rc=$? t=$(( $(date +%s) - T0 ))s" | tee -a "$OUT/dispatch/status.txt"
tail -n 22 "$OUT/dispatch/verify_paths.log"
LEFT=$(( 72 - ($(date +%s) - T0) ))
timeout -k 3 "$LEFT" $KB tune indexer_q fp8_linear compressor_step --impl triton --shapes flash-tp8 --batch 1 \
    --batch 16 --batch 64 --max-trials 2 --top-k 2 --rounds 1 --budget $(( LEFT - 5 )) --trial-timeout 20 \
    --no-isolate --no-sm120-check --export "$OUT/dispatch/tuned_v1.json" > "$OUT/dispatch/tune.log" 2>&1
echo "tune rc=$? t=$(( $(date +%s) - T0 ))s" | tee -a "$OUT/dispatch/status.txt"
grep -v "^  {" "$OUT/dispatch/tune.log" | tail -n 30
