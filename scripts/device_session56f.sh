#!/usr/bin/env bash
# Session 56's last call (about 300 s of device time left): the FP4 key form written by the indexer compressor's emit
# (compressor_step's key_codes / key_exps, no fp4_pack_keys launch). Its GPU tests (byte-equal to the separate pack;
# the decoder's logits), then the 43-layer step with bf16 and FP4 keys, alternating, at 512 tokens (C = 1, 16; the
# first runs compile). The longer version, 64K included, is scripts/device_session57a.sh.
#   run(command="KB_TOTAL_S=180 KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session56f.sh", carry=[".whl", ".gpu_peers"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-180}
source scripts/device_lib.sh || exit 1
step gpu_emit 50 python3 -m pytest -q -m gpu -p no:cacheprovider -rs tests/test_fp4_keys.py -k "compressor or decoder"
STEP="$KB decode-bench --device cuda --impl triton --graph on --layers flash --steps 20 --batches 1,16"
step short_bf16_1 55 $STEP --json "$W/short_bf16_1.json"
step short_fp4_1 35 env KERNELBENCH_KEY_CACHE=fp4 $STEP --json "$W/short_fp4_1.json"
step short_bf16_2 20 $STEP --json "$W/short_bf16_2.json"
step short_fp4_2 20 env KERNELBENCH_KEY_CACHE=fp4 $STEP --json "$W/short_fp4_2.json"
step_times short_bf16_1 short_fp4_1 short_bf16_2 short_fp4_2
finish
