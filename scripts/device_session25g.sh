#!/usr/bin/env bash
# Session 25, call 7 (the last, ~5 minutes of device time left). Call 6 put COMBINE_COLS 64 / 256 at one token +0.034
# / +0.030 ms against a control that moved -0.014 (interval -0.021 .. -0.005): inside the control's shift. The same
# trials at C = 1 only, 60 pairs each, with the control.
#   run(command="KB_TOTAL_S=150 KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session25g.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-150}
source scripts/device_lib.sh || exit 1
step try 130 $KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 1 --steps 60 \
    --try 'sparse_attention@T=1={"COMBINE_COLS": 64}' --try 'sparse_attention@T=1={"COMBINE_COLS": 256}' \
    --json "$W/try.json"
finish
