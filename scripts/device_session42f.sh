#!/usr/bin/env bash
# Session 42, call 6: attention_q's PATH "split" (fp8_linear, then head_rms_norm_rope; call 5: 9.15 / 11.45 us alone
# against the fused kernel's 10.72 / 12.37 at 16 / 64 tokens, and the step 0.10 ms shorter at C = 16 with
# `--use attention_q=triton_parts`, unpaired) verified on the GPU, then judged in the 43-layer step at C = 1 / 16 / 64
# in interleaved pairs against the step as it runs (A/A control first).
#   run(command="KB_TOTAL_S=240 KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session42f.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-240}
source scripts/device_lib.sh || exit 1
step verify_q 50 $KB verify attention_q --impl triton --device cuda --shapes flash-tp8 --examples 1 --time-budget 3 \
    --where M=1,16,64
step step_q 150 $KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 1,16,64 --steps 30 \
    --try 'attention_q={"PATH": "split"}' --json "$W/step_q.json"
finish
