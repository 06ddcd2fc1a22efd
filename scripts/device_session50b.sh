#!/usr/bin/env bash
# Session 50, call 2. Call 1 (an H100, ed859c5): GATE_TAIL "up" with one routed program set beat "last" in moe_layer
# (30.92 -> 29.21 us) and in moe_routed without the shared slice (22.33 -> 21.82), but moe_routed WITH the shared
# slice (the decoder's form) went 23.04 -> 26.92 and the step at C = 1 0.064 ms slower. moe_routed at one token
# splits W1 / W3 K by 8, so its "up" grid is (1 + 1) x 32 x 8 = 512 programs, two waves at two programs an SM (203
# registers): the routed programs, last in the grid, start in the second wave; moe_layer's (SPLIT_UP 4) is 256, one
# wave. This call: "up" with SPLIT_UP 4 (one wave) in moe_routed, bench and step; then the same with the top-k's row
# padding dropped (_local_topk TP 1: 4,119 sm_90 SASS against 4,322; an A/B of the installed copy, not committed:
# it spills 56 B on sm_120); then the GPU verify of moe_layer / moe_routed at the rank shapes.
#   run(command="KB_TOTAL_S=540 KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session50b.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-540}
source scripts/device_lib.sh || exit 1
U4='{"GATE_TAIL": "up", "SPLIT_UP": 4}'
U42='{"GATE_TAIL": "up", "SPLIT_UP": 4, "SPLIT_DOWN": 2}'
bench_routed() {  # bench_routed NAME: moe_routed at one token (with and without the shared slice) beside the two trials
    step "$1" 70 $KB bench moe_routed --impl triton --shapes flash-tp8 --where T=1 --where hash=False --max-time 0.3 \
        --try "moe_routed@T=1=$U4" --try "moe_routed@T=1=$U42" --json "$W/$1.json"
}
step_routed() {  # step_routed NAME: the 43-layer step at C = 1 with each trial, 30 pairs
    step "$1" 95 $KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 1 --steps 30 \
        --try "moe_routed@T=1=$U4" --try "moe_routed@T=1=$U42" --json "$W/$1.json"
}
bench_routed bench_u4
step_routed step_u4
variant_of kernels/moe.py moe_tp2 moe_tp1 's/E, EP, HAS_BIAS, 2, True)/E, EP, HAS_BIAS, 1, True)/'
use_variant kernels/moe.py moe_tp1
bench_routed bench_u4_tp1
step_routed step_u4_tp1
use_variant kernels/moe.py moe_tp2
step verify 200 $KB verify moe_layer moe_routed --impl triton --device cuda --shapes flash-tp8 --examples 2
finish
