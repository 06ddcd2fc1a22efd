#!/usr/bin/env bash
# Session 56's first call (written in session 55, which got no device: new loans were paused). The two caches stored
# in the forms SPEC 2 names for production engines, both op-level, untimed, bit-equal to impl triton at the same config
# in the interpreter: the attention cache as FP8 (impl triton_fp8kv of sparse_attention, session 54: 584 bytes an entry
# instead of 1024) and the indexer's keys as FP4 (impl triton_fp4keys of indexer_topk / csa_indices, session 55: 68
# bytes a key instead of 256). Their GPU tests and verify first, then each alone beside impl triton (same run, same
# inputs; impl triton also at the packed impl's blocks): the attention at context 512, the indexer at 512 and 64K.
#   run(command="KB_TOTAL_S=560 KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session56a.sh", carry=[".whl", ".gpu_peers"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-560}
source scripts/device_lib.sh || exit 1
step gpu_packed 110 python3 -m pytest -q -m gpu -p no:cacheprovider -rs tests/test_fp8_kv.py tests/test_fp4_keys.py \
    -k "not decoder"
step verify_fp8kv 80 $KB verify sparse_attention --impl triton_fp8kv --device cuda --shapes flash-tp8 --examples 2
step verify_fp4keys 90 $KB verify indexer_topk csa_indices --impl triton_fp4keys --device cuda --shapes flash-tp8 \
    --examples 2
step bench_fp4keys 160 $KB bench csa_indices --impl triton --impl triton_fp4keys --shapes flash-tp8-long \
    --where ctx=512,65536 --max-time 0.3 --try 'csa_indices={"BLOCK_S": 64}' --json "$W/bench_fp4keys.json"
step bench_fp8kv 90 $KB bench sparse_attention --impl triton --impl triton_fp8kv --shapes flash-tp8 --max-time 0.3 \
    --try 'sparse_attention={"BLOCK_N": 16}' --json "$W/bench_fp8kv.json"
finish
