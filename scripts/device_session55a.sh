#!/usr/bin/env bash
# Session 55's first call (written in session 54). The attention cache stored as FP8 (impl triton_fp8kv of
# sparse_attention, built in session 54, untimed: 584 bytes an entry instead of 1024, the split kernel making each
# gathered row bf16 again, bit-equal to impl triton at the same config): its GPU test and verify first, then alone
# beside impl triton (its own default and impl triton at the FP8 impl's 16-entry blocks, same run, same inputs) at
# context 512 and 8192, and a tune of its space at 64 tokens. On an H200 with time left: issue 9's table beside the
# peer and the step with its attribution (none since session 46).
#   run(command="KB_TOTAL_S=560 KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session55a.sh", carry=[".whl", ".gpu_peers"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-560}
source scripts/device_lib.sh || exit 1
step gpu_fp8kv 80 python3 -m pytest -q -m gpu -p no:cacheprovider -rs tests/test_fp8_kv.py
step verify_fp8kv 90 $KB verify sparse_attention --impl triton_fp8kv --device cuda --shapes flash-tp8 --examples 2
step bench_fp8kv 120 $KB bench sparse_attention --impl triton --impl triton_fp8kv --shapes flash-tp8 --max-time 0.3 \
    --try 'sparse_attention={"BLOCK_N": 16}' --json "$W/bench_fp8kv.json"
step tune_fp8kv64 90 $KB tune sparse_attention --impl triton_fp8kv --shapes flash-tp8 --where T=64 --where ctx=512 \
    --max-trials 24 --top-k 3 --rounds 2 --budget 80 --export "$W/tuned.json"
issue9_table_on_h200
if grep -q "H200" "$W/environment.txt"; then step_attributed; fi
finish
