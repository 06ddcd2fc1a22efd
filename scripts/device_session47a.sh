#!/usr/bin/env bash
# Session 47, call 1. (a) session 46's unrun KERNELBENCH_FP8_PROMOTE measurement (scripts/device_session46c.sh's
# steps: the GPU test, accuracy over drawn examples, cost in the step at C = 1 / 16 / 64, the MoE verify); (b) the
# in-kernel timeline of moe_layer (kernels/trace.py, scripts/moe_timeline.py): where a one-token call's 28 us go
# between the gate, the W1 / W3 and the W2 launches, score and hash routing, and at 16 / 64 tokens.
# Steps in order of need (a call cut short still brings back the steps before the cut). The verify runs with KERNELBENCH_FP8_PROMOTE=32: the default it would become (session 46 call 5 ran it at 0).
#   run(command="KB_TOTAL_S=440 KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session47a.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-440}
source scripts/device_lib.sh || exit 1
step gpu_tests 70 python3 -m pytest -q -m gpu -p no:cacheprovider -rs tests/test_trace.py tests/test_moe.py \
    -k "traced_moe or fp8_promote_closes"
step step_promote 75 $KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 1,16,64 --steps 30 \
    --try KERNELBENCH_FP8_PROMOTE=32 --json "$W/step_promote.json"
step timeline1 45 python3 scripts/moe_timeline.py --device cuda --tokens 1 --hash --json "$W/timeline1.json"
step verify_moe 90 env KERNELBENCH_FP8_PROMOTE=32 $KB verify moe_gate moe_experts shared_expert moe_layer fp8_linear \
    --impl triton --device cuda \
    --shapes flash-tp8 --examples 3
step timeline 50 python3 scripts/moe_timeline.py --device cuda --tokens 16,64 --json "$W/timeline.json"
step accuracy 60 python3 scripts/fp8_outlier_accuracy.py --device cuda --examples 20 --json "$W/accuracy.json"
finish
