#!/usr/bin/env bash
# Session 11's second H200 call: the 43-layer step's kernels (decode-bench --kernels) at C = 1 / 16 / 64, then
# `kernelbench tune` at C = 1 of the ops that had only defaults there (attention_front, mhc_post_pre_norm,
# attention_q, grouped_wo_a; verified first: export refuses an unverified path) into a copy of the packaged tuned
# table, and the step at C = 1 on that table.
#   run(command="KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session11b.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-570}
source scripts/device_lib.sh || exit 1
OPS="attention_front mhc_post_pre_norm attention_q grouped_wo_a"
DECODE="$KB decode-bench --device cuda --impl triton --graph on --layers flash --kernels"
cp kernelbench/tuned/v1.json "$W/tuned.json"
step decode_before 150 $DECODE --batches 1,16,64 --json "$W/decode_before.json"
step verify 80 $KB verify $OPS --impl triton --device cuda --shapes flash-tp8 --examples 2 --time-budget 6
step tune 230 $KB tune $OPS --impl triton --batch 1 --max-trials 14 --budget 215 --export "$W/tuned.json"
step decode_after 70 env KERNELBENCH_TUNED="$W/tuned.json" $DECODE --batches 1 --json "$W/decode_after.json"
step decode_before_again 40 $DECODE --batches 1 --json "$W/decode_before_again.json"
finish
