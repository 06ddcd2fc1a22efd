#!/usr/bin/env bash
# Session 55's call after the loans came back (the review's): the kernels changed since the last GPU verify. The
# packed caches' GPU tests (not the decoder's: its compile is long) and verify (impl triton_fp8kv of
# sparse_attention, triton_fp4keys of indexer_topk / csa_indices), the kernels whose helpers moved (fp4_pack_keys,
# compressor_step: token_emits; act_quant_fp4: fp4_quant_pairs), then the FP4 keys beside impl triton at 512 and
# 64K tokens and the FP8 cache beside impl triton at its blocks.
#   run(command="KB_TOTAL_S=560 KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session55b.sh", carry=[".whl", ".gpu_peers"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-560}
source scripts/device_lib.sh || exit 1
step gpu_packed 120 python3 -m pytest -q -m gpu -p no:cacheprovider -rs tests/test_fp8_kv.py tests/test_fp4_keys.py \
    tests/test_timing.py -k "not decoder"
step verify_fp8kv 70 $KB verify sparse_attention --impl triton_fp8kv --device cuda --shapes flash-tp8 --examples 2
step verify_fp4keys 80 $KB verify indexer_topk csa_indices --impl triton_fp4keys --device cuda --shapes flash-tp8 \
    --examples 2
step verify_moved 80 $KB verify fp4_pack_keys compressor_step act_quant_fp4 --impl triton --device cuda \
    --shapes flash-tp8 --examples 2
step bench_fp4keys 110 $KB bench csa_indices --impl triton --impl triton_fp4keys --shapes flash-tp8-long \
    --where ctx=512,65536 --max-time 0.3 --try 'csa_indices={"BLOCK_S": 64}' --json "$W/bench_fp4keys.json"
step bench_fp8kv 80 $KB bench sparse_attention --impl triton --impl triton_fp8kv --shapes flash-tp8 --max-time 0.3 \
    --try 'sparse_attention={"BLOCK_N": 16}' --json "$W/bench_fp8kv.json"
finish
