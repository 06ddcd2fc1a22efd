#!/usr/bin/env bash
# Session 11's fifth H200 call: the ratio-4 compressor steps (the side lane's longest work at C = 1) in two launches
# (config PATH "one" with EMIT_MAX_T 0: the D-split projection reduced by its last program, then the emit) against
# the three of the default ("split": projection, reduce, emit): the op bench with that config pinned, and the
# 43-layer step at C = 1 with the two T = 1 ratio-4 entries of the tuned table replaced (KERNELBENCH_TUNED).
#   run(command="KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session11e.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-240}
source scripts/device_lib.sh || exit 1
TWO='{"BLOCK_N":64,"BLOCK_K":128,"num_warps":4,"num_stages":3,"ROWS":16,"SPLIT":"auto","waves":2,"RB":2,"PATH":"one","EMIT_MAX_T":0}'
echo "two-launch config: $TWO" >> "$W/environment.txt"
python3 scripts/tuned_variant.py compressor_step '{"T": 1, "ratio": 4}' "$TWO" "$W/tuned_two.json"
BENCH="$KB bench compressor_step --impl triton --shapes flash-tp8 --batch 1 --max-time 0.2"
DECODE="$KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 1"
step bench_three 40 $BENCH --json "$W/bench_three.json"
step bench_two 30 env KERNELBENCH_PIN_CONFIG="compressor_step=$TWO" $BENCH --json "$W/bench_two.json"
step decode_three 80 $DECODE --json "$W/decode_three.json"
step decode_two 30 env KERNELBENCH_TUNED="$W/tuned_two.json" $DECODE --json "$W/decode_two.json"
step decode_three_again 25 $DECODE --json "$W/decode_three_again.json"
step decode_two_again 25 env KERNELBENCH_TUNED="$W/tuned_two.json" $DECODE --json "$W/decode_two_again.json"
finish
