#!/usr/bin/env bash
# Written in session 48 and not run there (no machine could be started: 1,800 s of device time went on refused and
# failed starts); the next session's first call. Session 47 call 1 (an H100) timed moe_layer's programs at one token
# (scripts/moe_timeline.py): the one-launch gate's last program, from its ticket to its routing lists, ran ~8.4 us of
# the ~29.8 us call, on the critical path. Session 48 built GATE_TAIL "up" (kernels/moe.py _gate_tail): the gate only
# scores, and each routed W1 / W3 program takes the top-k itself after its wait. This call: (1) the GPU tests of the
# timeline (the hash case with the arena), of the fp8 promotion and of "up" (bit-equal to "last", graph replay);
# (2) "up" in moe_layer's / moe_routed's bench rows and (3) in the 43-layer step at C = 1; (4) the one-token timeline,
# default against "up"; (5) verify of the fp8 and MoE ops at KERNELBENCH_FP8_PROMOTE=32 (issue 9's "done when"
# command); (6) the timeline at 16 / 64 tokens; (7) the accuracy script.
#   run(command="KB_TOTAL_S=560 KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session48a.sh", carry=[".whl"])
# A machine's start has cost 90-180 s of device time when it failed: size KB_TOTAL_S to what is left minus ~170 s.
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-560}
source scripts/device_lib.sh || exit 1
UP='{"GATE_TAIL": "up"}'
step gpu_up 75 python3 -m pytest -q -m gpu -p no:cacheprovider -rs tests/test_moe.py -k up_launch
# with the gate tail off the critical path the routed items start earlier: their K split retried beside (8 splits: 256
# programs an item, each half the bytes; offline sm_90 / sm_120: no spills)
step bench_up 90 $KB bench moe_layer moe_routed --impl triton --shapes flash-tp8 --where T=1 --where hash=False \
    --max-time 0.3 --try "moe_layer@T=1=$UP" --try "moe_routed@T=1=$UP" \
    --try 'moe_layer@T=1={"GATE_TAIL": "up", "SPLIT_UP": 8}' \
    --try 'moe_layer@T=1={"GATE_TAIL": "up", "SPLIT_UP": 8, "SPLIT_DOWN": 4}' --json "$W/bench_up.json"
step step_up 80 $KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 1 --steps 30 \
    --try "moe_routed@T=1=$UP" --json "$W/step_up.json"
step gpu_tests 90 python3 -m pytest -q -m gpu -p no:cacheprovider -rs tests/test_trace.py tests/test_moe.py \
    -k "traced_moe or fp8_promote_closes"
step timeline1 50 python3 scripts/moe_timeline.py --device cuda --tokens 1 --replays 10 --pin "$UP" \
    --json "$W/timeline1.json"
step verify 120 $KB verify moe_gate moe_experts shared_expert moe_layer fp8_linear --impl triton --device cuda \
    --shapes flash-tp8 --examples 3
step timeline 50 python3 scripts/moe_timeline.py --device cuda --tokens 16,64 --replays 10 --json "$W/timeline.json"
step accuracy 50 python3 scripts/fp8_outlier_accuracy.py --device cuda --examples 20 --json "$W/accuracy.json"
finish
