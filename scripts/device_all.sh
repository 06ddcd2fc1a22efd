#!/usr/bin/env bash
# GPU call A on the device machine (about 9 minutes): the GPU-only tests, `kernelbench verify` of every
# kernel at Flash TP8 decode shapes (C = 1, 16, 64) plus hypothesis examples, and the decode benchmark.
#   run(command="KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_all.sh", carry=[".whl"], timeout_s=600)
# Call B is scripts/device_measure.sh (calibrate, bench, tune, roofline, scaling).
set -uo pipefail
cd "$(dirname "$0")/.."
T0=$(date +%s)
OUT="${OUT:-/tmp/kb_out}"
mkdir -p "$OUT"
source scripts/device_env.sh || { echo "device_env.sh failed"; exit 1; }
export KERNELBENCH_HOME="$OUT/home" KERNELBENCH_QUIET_TUNING=1
export KERNELBENCH_GIT_COMMIT="${KERNELBENCH_GIT_COMMIT:-unknown}"
step() {  # step NAME SECONDS COMMAND...
    local name=$1 limit=$2; shift 2
    local t=$(date +%s)
    echo "=== $name (limit ${limit}s, at $(( t - T0 ))s) ==="
    timeout -k 10 "$limit" "$@" > "$OUT/$name.log" 2>&1
    echo "$name rc=$? wall=$(( $(date +%s) - t ))s" | tee -a "$OUT/status.txt"
    tail -n 30 "$OUT/$name.log"
}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > "$OUT/environment.txt" 2>&1
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" >> "$OUT/environment.txt"
step gpu_tests 150 python3 -m pytest -q -p no:cacheprovider -m gpu tests
step verify 300 sh -c "python3 -m kernelbench verify --device cuda --shapes flash-tp8 --examples 8 --time-budget 5 \
    --db sqlite:///$OUT/verify-h200.sqlite --json > $OUT/verify-h200.json"
step decode_bench 120 python3 -m kernelbench decode-bench --device cuda --impl triton --profile \
    --json "$OUT/decode_bench.json"
echo "=== done in $(( $(date +%s) - T0 ))s ==="
cat "$OUT/status.txt"
