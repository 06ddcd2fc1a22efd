#!/usr/bin/env bash
# Session 53's first call (written in session 52, when no H200 came). On an H200 (the card issues 9 and 17 name; none
# since session 46): the copy ceiling, issue 9's table beside the triton_kernels peer (carry .gpu_peers), its "done
# when" verify, then the 43-layer step at C = 1 / 16 / 64 with its per-op attribution (issue 17's non-MoE us a layer).
# On an H100: the step and its attribution only (sessions 47-52 measured the rest there).
#   run(command="KB_TOTAL_S=540 KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session53a.sh", carry=[".whl", ".gpu_peers"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-540}
source scripts/device_lib.sh || exit 1
issue9_table_on_h200
if grep -q "H200" "$W/environment.txt"; then
    step verify9 200 $KB verify moe_gate moe_experts shared_expert moe_layer --impl triton --device cuda \
        --shapes flash-tp8 --examples 3
fi
# limits for a cold machine: the step at three batches took about 110 s cold in session 51
step step 150 $KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 1,16,64 --profile \
    --json "$W/step.json"
step_times step
finish
