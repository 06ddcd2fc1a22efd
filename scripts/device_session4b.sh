#!/usr/bin/env bash
# Follow-up H200 call of the fourth 2026-12-01 session: what device_session4.sh's limits cut (verify of
# compressor_step and indexer_q, the moe_layer rows, the GPU tests of the changed kernel families).
#   run(command="KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session4b.sh", carry=[".whl"]; .gpu_peers is optional)
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-235}
source scripts/device_lib.sh || exit 1
step verify 70 sh -c "$KB verify compressor_step indexer_q --impl triton --device cuda --shapes flash-tp8 --examples 3 \
    --time-budget 3 --json > $W/verify.json"
step bench_moe_layer 55 $KB bench moe_layer --impl triton --impl triton_v2 --shapes flash-tp8 --batch 1 --batch 16 \
    --batch 64 --max-time 0.1 --target-rse 0.03 --max-sets 32 --run-tag session4 --json "$W/bench_moe_layer.json"
step gpu_tests 100 python3 -m pytest -q -p no:cacheprovider -o addopts="" -m gpu tests/test_moe.py tests/test_linear.py \
    tests/test_compressor.py tests/test_indexer.py tests/test_attention.py tests/test_mhc.py tests/test_decode_bench.py
finish
