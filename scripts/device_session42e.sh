#!/usr/bin/env bash
# Session 42, call 5: attention_q at 16 / 64 tokens (call 4: its 32- / 64-row tiles with the in-kernel head tail were
# slower, 14.0-30.0 against the default's 12.6 us at 64) against its separate kernels (`triton_parts`: act_quant,
# fp8_linear at its own default, a 64-row tile from 33 rows, then head_rms_norm_rope), and attention_front's; then
# the step at C = 16 / 64 as shipped, with `--use attention_q=triton_parts`, and as shipped again (drift).
#   run(command="KB_TOTAL_S=200 KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session42e.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-200}
source scripts/device_lib.sh || exit 1
step parts 50 $KB bench attention_q attention_front --impl triton --impl triton_parts --shapes flash-tp8 \
    --where M=16,64 --where compressed=False --max-time 0.15 --json "$W/parts.json"
S="--device cuda --impl triton --graph on --layers flash --batches 16,64 --steps 30"
step base 60 $KB decode-bench $S --json "$W/base.json"
step q_parts 40 $KB decode-bench $S --use attention_q=triton_parts --json "$W/q_parts.json"
step base2 40 $KB decode-bench $S --json "$W/base2.json"
step_times base q_parts base2
finish
