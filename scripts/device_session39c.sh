#!/usr/bin/env bash
# Session 39, call 6: attention_front's q tail as whole rows above one token (config Q_NORM "row" at the default's RB 16
# rows: 64 fp32 values a thread at 8 warps; sm_90 117 / sm_120 128 registers, no spill), against the chunked tail (8
# dependent 256-column loads a row block). Verify (the covering configs), the op rows at 16 / 64 tokens beside the
# default on the same inputs, the 43-layer step at C = 16 / 64 in interleaved pairs; then the step as shipped at this
# tree (Q_NORM "row" the default at one token, the lm_head T = 1 H200 entry) with its attribution at C = 1 / 16 / 64.
#   run(command="KB_TOTAL_S=330 KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session39c.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-330}
source scripts/device_lib.sh || exit 1
ROW='{"Q_NORM": "row"}'
step copy 20 $KB calibrate --measure copy_gbps
step verify 70 $KB verify attention_front --impl triton --device cuda --shapes flash-tp8 --examples 1 --time-budget 3
step ops 50 $KB bench attention_front --impl triton --shapes flash-tp8 --where M=16,64 --max-time 0.3 \
    --try "attention_front=$ROW" --json "$W/ops.json"
step step_row 90 $KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 16,64 --steps 30 \
    --try "attention_front@M=16,64=$ROW" --json "$W/step_row.json"
step step_attr 90 $KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 1,16,64 --profile \
    --json "$W/step_attr.json"
finish
