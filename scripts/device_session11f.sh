#!/usr/bin/env bash
# Session 11's sixth H200 call: the packaged table's two-launch ratio-4 compressor entries (T = 1) verified on the GPU
# and judged on the step by decode-bench --ablate-tuned (paired steps with and without each op's tuned entries).
#   run(command="KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session11f.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-200}
source scripts/device_lib.sh || exit 1
step verify 50 $KB verify compressor_step --impl triton --device cuda --shapes flash-tp8 --examples 2 --time-budget 6
step ablate 140 $KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 1 --ablate-tuned \
    --json "$W/ablate.json"
finish
