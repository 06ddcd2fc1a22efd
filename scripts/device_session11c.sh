#!/usr/bin/env bash
# Session 11's third H200 call: attention_front / attention_q at one token on fp8_linear's BM = 1 GEMV (the new
# default) against their previous default (a 16-row tensor-core tile, pinned): verify, the ops' bench both ways, the
# 43-layer step at C = 1 both ways and the step's kernels at C = 1 / 16 / 64.
#   run(command="KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session11c.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-500}
source scripts/device_lib.sh || exit 1
OLD='attention_front={"BM":16,"BN":64,"SPLIT":8,"num_warps":8,"num_stages":3,"RB":1};attention_q={"BM":16,"BN":64,"SPLIT":4,"num_warps":8,"num_stages":3,"RB":1}'
echo "previous default (pinned): $OLD" >> "$W/environment.txt"
DECODE="$KB decode-bench --device cuda --impl triton --graph on --layers flash"
BENCH="$KB bench attention_front attention_q --impl triton --shapes flash-tp8 --batch 1 --max-time 0.3"
step verify 70 $KB verify attention_front attention_q --impl triton --device cuda --shapes flash-tp8 --examples 3 \
    --time-budget 8
step bench_gemv 60 $BENCH --json "$W/bench_gemv.json"
step bench_tile 50 env KERNELBENCH_PIN_CONFIG="$OLD" $BENCH --json "$W/bench_tile.json"
step decode_gemv 140 $DECODE --batches 1,16,64 --kernels --json "$W/decode_gemv.json"
step decode_tile 45 env KERNELBENCH_PIN_CONFIG="$OLD" $DECODE --batches 1 --kernels --json "$W/decode_tile.json"
step decode_gemv_again 40 $DECODE --batches 1 --json "$W/decode_gemv_again.json"
step decode_tile_again 40 env KERNELBENCH_PIN_CONFIG="$OLD" $DECODE --batches 1 --json "$W/decode_tile_again.json"
finish
