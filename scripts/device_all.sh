#!/usr/bin/env bash
# The closing GPU call on the device machine (about 8 minutes): `kernelbench verify`
# of every kernel at Flash TP8 decode shapes (C = 1, 16, 64) plus hypothesis examples, the decode
# benchmark (CUDA graph), a MoE/indexer tune, a MoE bench and the sparse-attention scaling sweeps.
#   run(command="KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_all.sh", carry=[".whl"], timeout_s=600)
# The device tool brings back at most 8 files, so everything is packed into $OUT/results.tgz.
# (scripts/device_measure.sh is the longer calibrate/bench/tune/roofline/scaling run.)
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-540}
source scripts/device_lib.sh || exit 1
# the GPU-only tests outgrew this call (~9 minutes on an H100): scripts/device_gpu_tests.sh runs them in two calls
step verify 240 sh -c "$KB verify --device cuda --shapes flash-tp8 --examples 6 --time-budget 4 \
    --db sqlite:///$W/verify-h200.sqlite --json > $W/verify-h200.json"
step decode_bench 150 $KB decode-bench --device cuda --impl triton --graph on --layers flash --profile \
    --json "$W/decode_bench.json"
step tune_moe 100 $KB tune moe_experts --shapes flash-tp8 --batch 1 --batch 16 --batch 64 --max-trials 6 --top-k 2 \
    --rounds 2 --budget 90 --trial-timeout 30 --no-sm120-check --export "$W/tuned_v1.json"
step tune_indexer 70 $KB tune indexer_topk --shapes flash-tp8 --batch 1 --batch 16 --batch 64 --context 512 \
    --max-trials 6 --top-k 2 --rounds 2 --budget 60 --trial-timeout 30 --no-sm120-check --export "$W/tuned_v1.json"
step bench_moe 60 $KB bench moe_layer moe_experts --impl triton --shapes flash-tp8 --batch 1 --batch 16 --batch 64 \
    --max-time 0.3 --target-rse 0.02 --max-sets 128 --run-tag device-final-moe --json "$W/bench_moe.json"
step scaling_attn 60 $KB scaling sparse_attention --impl triton --max-time 0.3 --json "$W/scaling_attn.json"
step report 30 $KB report --out "$W/report.html"
python3 -c "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); c.execute('PRAGMA wal_checkpoint(TRUNCATE)')" "$W/kernelbench.sqlite" 2>/dev/null
python3 -c "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); c.execute('PRAGMA wal_checkpoint(TRUNCATE)')" "$W/verify-h200.sqlite" 2>/dev/null
rm -rf "$W/home"
tar czf "$OUT/results.tgz" -C "$W" .
echo "=== done in $(( $(date +%s) - T0 ))s ==="
cat "$W/status.txt"
