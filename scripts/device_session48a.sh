#!/usr/bin/env bash
# Next session's first call (written at the end of session 47, unrun). Session 47 call 1 (an H100) timed moe_layer's
# programs at one token (scripts/moe_timeline.py): the one-launch gate's last program, from its ticket to its routing
# lists, ran ~8.4 us of the ~29.8 us call, the largest stretch on the critical path. This call: (1) the GPU tests of
# the timeline (the hash-routed case faulted in session 47 with per-launch rows; the rows are now one arena) and of
# the fp8 promotion; (2) the timeline at one token with the gate tail's sub-steps, default against ROUTE_SORT "slots"
# (the slot sort from the top-k in registers: no reload of the ids, opt-in and never timed), score and hash routing;
# (3) that pin in moe_layer's bench row and in the 43-layer step; (4) verify of the fp8 and MoE ops at the new default
# KERNELBENCH_FP8_PROMOTE=32 (issue 9's "done when" command, --impl triton); (5) the timeline at 16 / 64 tokens.
#   run(command="KB_TOTAL_S=540 KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session48a.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-540}
source scripts/device_lib.sh || exit 1
step gpu_tests 90 python3 -m pytest -q -m gpu -p no:cacheprovider -rs tests/test_trace.py tests/test_moe.py \
    -k "traced_moe or fp8_promote_closes"
step timeline1 60 python3 scripts/moe_timeline.py --device cuda --tokens 1 --hash --pin '{"ROUTE_SORT": "slots"}' \
    --json "$W/timeline1.json"
step bench_slots 60 $KB bench moe_layer --impl triton --shapes flash-tp8 --where T=1 --max-time 0.3 \
    --try 'moe_layer@T=1={"ROUTE_SORT": "slots"}' --json "$W/bench_slots.json"
step step_slots 75 $KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 1 --steps 30 \
    --try 'moe_routed@T=1={"ROUTE_SORT": "slots"}' --json "$W/step_slots.json"
step verify 120 $KB verify moe_gate moe_experts shared_expert moe_layer fp8_linear --impl triton --device cuda \
    --shapes flash-tp8 --examples 3
step timeline 60 python3 scripts/moe_timeline.py --device cuda --tokens 16,64 --json "$W/timeline.json"
step accuracy 60 python3 scripts/fp8_outlier_accuracy.py --device cuda --examples 20 --json "$W/accuracy.json"
finish
