#!/usr/bin/env bash
# Session 57's first call (written in session 56). The indexer compressor's emit now writes the FP4 key form itself
# (compressor_step's key_codes / key_exps: no fp4_pack_keys launch, one launch fewer a csa layer); session 56 timed
# the FP4 key cache with the separate pack (0.041 ms slower at C = 1 and 512 tokens, 0.142 faster at C = 16 / 64K).
# The GPU tests (the emit's key outputs bit-equal to the separate pack; the decoder's logits), verify of
# compressor_step and fp4_pack_keys (their kernels changed), then the step with bf16 and FP4 keys at 512 and 64K
# tokens, alternating (separate runs: the cache is made once). On an H200 issue 9's table first.
#   run(command="KB_TOTAL_S=560 KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session57a.sh", carry=[".whl", ".gpu_peers"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-560}
source scripts/device_lib.sh || exit 1
issue9_table_on_h200
step gpu_keys 150 python3 -m pytest -q -m gpu -p no:cacheprovider -rs tests/test_fp4_keys.py
step verify_emit 90 $KB verify compressor_step fp4_pack_keys --impl triton --device cuda --shapes flash-tp8 --examples 2
STEP="$KB decode-bench --device cuda --impl triton --graph on --layers flash --steps 20"
for i in 1 2; do
    step "short_bf16_$i" 40 $STEP --batches 1,16,64 --json "$W/short_bf16_$i.json"
    step "short_fp4_$i" 40 env KERNELBENCH_KEY_CACHE=fp4 $STEP --batches 1,16,64 --json "$W/short_fp4_$i.json"
    step "long_bf16_$i" 60 $STEP --batches 1,16 --context 65536 --json "$W/long_bf16_$i.json"
    step "long_fp4_$i" 60 env KERNELBENCH_KEY_CACHE=fp4 $STEP --batches 1,16 --context 65536 --json "$W/long_fp4_$i.json"
done
step_times short_bf16_1 short_fp4_1 short_bf16_2 short_fp4_2 long_bf16_1 long_fp4_1 long_bf16_2 long_fp4_2
finish
