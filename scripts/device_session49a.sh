#!/usr/bin/env bash
# Session 49, call 3: GATE_TAIL "up" with one routed program set. Call 1 (an H100) timed session 48's form slower
# (moe_layer 31.08 -> 32.24 us, moe_routed 22.23 -> 29.08, the C = 1 step 0.431 ms slower): its grid kept a program
# set for each of the token's possible local items (6 at one token), so 5 of 6 sets took the whole top-k only to find
# no item (timeline: their programs busy 9.5 kcycles, W2 released 2.1 us later). Now one set runs the token's chosen
# local experts in turn. This call: its GPU bit test, the bench rows, the step at C = 1, the one-token timeline.
#   run(command="KB_TOTAL_S=150 KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session49a.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-240}
source scripts/device_lib.sh || exit 1
UP='{"GATE_TAIL": "up"}'
step gpu_up 75 python3 -m pytest -q -m gpu -p no:cacheprovider -rs tests/test_moe.py -k up_launch
step bench_up 50 $KB bench moe_layer moe_routed --impl triton --shapes flash-tp8 --where T=1 --where hash=False \
    --max-time 0.3 --try "moe_layer@T=1=$UP" --try "moe_routed@T=1=$UP" --json "$W/bench_up.json"
step step_up 60 $KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 1 --steps 30 \
    --try "moe_routed@T=1=$UP" --json "$W/step_up.json"
step timeline1 30 python3 scripts/moe_timeline.py --device cuda --tokens 1 --replays 10 --pin "$UP" \
    --json "$W/timeline1.json"
# with the top-k once a program, the routed items' K split again (the grid one wave at SPLIT_UP 8: 128 + 256)
step bench_split 40 $KB bench moe_layer moe_routed --impl triton --shapes flash-tp8 --where T=1 --where hash=False \
    --max-time 0.3 --try 'moe_layer@T=1={"GATE_TAIL": "up", "SPLIT_UP": 8}' \
    --try 'moe_routed@T=1={"GATE_TAIL": "up", "SPLIT_UP": 8}' --json "$W/bench_split.json"
finish
