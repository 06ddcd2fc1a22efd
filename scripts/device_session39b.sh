#!/usr/bin/env bash
# Session 39, call 2: config Q_NORM "row" of attention_front (one token). The q tail (q_norm over the 1024-wide q_lora
# row, run by the last q tile's program after two tickets) walked the row in 256-column chunks, twice (sum of squares,
# then scale and store, q_norm's weight loaded in the second pass): eight dependent loads on the step's critical path
# at C = 1 (`kernelbench inspect --target sm_90 --batch 1 --loop-loads`: _attention_front_kernel, nearest reader 2).
# "row" loads the row once, the weight before the ticket. Verify (the covering configs take it), the op row beside the
# default on the same inputs, and the 43-layer step at C = 1 in interleaved pairs.
#   run(command="KB_TOTAL_S=330 KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session39b.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-330}
source scripts/device_lib.sh || exit 1
ROW='{"Q_NORM": "row"}'
step copy 20 $KB calibrate --measure copy_gbps
step verify 90 $KB verify attention_front --impl triton --device cuda --shapes flash-tp8 --examples 1 --time-budget 3
step ops 50 $KB bench attention_front --impl triton --shapes flash-tp8 --where M=1 --max-time 0.3 \
    --try "attention_front=$ROW" --json "$W/ops.json"
step step_row 120 $KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 1 --steps 30 \
    --try "attention_front@M=1=$ROW" --json "$W/step_row.json"
finish
