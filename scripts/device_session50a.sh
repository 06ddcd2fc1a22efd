#!/usr/bin/env bash
# (It replaced session 49's unrun scripts/device_session49a.sh, whose steps come first here; removed in session 50.)
# Session 50, call 1: GATE_TAIL "up" with one routed program set (session 49's rebuild, ae71154 onward, never run on a
# GPU). Its GPU bit test first, then the bench rows at one token, the step at C = 1 with it, the one-token timeline,
# the GPU verify of moe_layer / moe_routed at the rank shapes (config paths incl. GATE_TAIL=up), SPLIT_UP 8 with it;
# on an H200 (the card issue 9 names) also the copy ceiling and issue 9's table.
#   run(command="KB_TOTAL_S=560 KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session50a.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-560}
source scripts/device_lib.sh || exit 1
UP='{"GATE_TAIL": "up"}'
step gpu_up 75 python3 -m pytest -q -m gpu -p no:cacheprovider -rs tests/test_moe.py -k up_launch
step bench_up 50 $KB bench moe_layer moe_routed --impl triton --shapes flash-tp8 --where T=1 --where hash=False \
    --max-time 0.3 --try "moe_layer@T=1=$UP" --try "moe_routed@T=1=$UP" --json "$W/bench_up.json"
step step_up 60 $KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 1 --steps 30 \
    --try "moe_routed@T=1=$UP" --json "$W/step_up.json"
step timeline1 30 python3 scripts/moe_timeline.py --device cuda --tokens 1 --replays 10 --pin "$UP" \
    --json "$W/timeline1.json"
step verify 130 $KB verify moe_layer moe_routed --impl triton --device cuda --shapes flash-tp8 --examples 3
step bench_split 40 $KB bench moe_layer moe_routed --impl triton --shapes flash-tp8 --where T=1 --where hash=False \
    --max-time 0.3 --try 'moe_layer@T=1={"GATE_TAIL": "up", "SPLIT_UP": 8}' \
    --try 'moe_routed@T=1={"GATE_TAIL": "up", "SPLIT_UP": 8}' --json "$W/bench_split.json"
if grep -q "H200" "$W/environment.txt"; then
    step copy 30 $KB calibrate --measure copy_gbps
    step issue9 150 $KB bench moe_layer moe_experts --impl triton --shapes flash-tp8 --where hash=False \
        --max-time 0.3 --json "$W/issue9.json"
fi
finish
