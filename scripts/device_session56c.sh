#!/usr/bin/env bash
# Session 56's third call (written in session 55). The decoder's indexer key cache as FP4 (KERNELBENCH_KEY_CACHE=fp4,
# session 55: 68 bytes a key instead of 256, the logits bit-equal to the bf16 key cache in the interpreter): its GPU
# test, then the 43-layer step at 64K tokens (where the indexer reads 16,384 keys a token and csa layer),
# bf16 and FP4 keys alternately (separate runs: a --try trial cannot change the cache), the last pair with attribution.
#   run(command="KB_TOTAL_S=560 KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session56c.sh", carry=[".whl", ".gpu_peers"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-560}
source scripts/device_lib.sh || exit 1
step gpu_keys 150 python3 -m pytest -q -m gpu -p no:cacheprovider -rs tests/test_fp4_keys.py -k decoder
STEP="$KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 1,16 --steps 20"
for i in 1 2; do
    PROFILE=""; if [ "$i" = 2 ]; then PROFILE="--profile"; fi
    step "keys_bf16_$i" 100 $STEP --context 65536 $PROFILE --json "$W/keys_bf16_$i.json"
    step "keys_fp4_$i" 100 env KERNELBENCH_KEY_CACHE=fp4 $STEP --context 65536 $PROFILE --json "$W/keys_fp4_$i.json"
done
step_times keys_bf16_1 keys_fp4_1 keys_bf16_2 keys_fp4_2
finish
