#!/usr/bin/env bash
# Session 52's first call (written in session 51). On an H200 first (issue 9's card, none since session 46): issue
# 9's table beside the peer and its verify. Then, on any card: the GPU tests of the trace (the finishing programs'
# new sub-step marks: ticket won, block stored; the gate tail's steps 0-4) and of the MoE gate; ROUTE_SORT "slots" on
# the one-row top-k tile (it compiles since session 51; on two rows it was 0.014 ms slower at C = 1), paired in the
# step; the one-token timeline of moe_routed (the step's form) with the W1/W3 and W2 finishing programs' marks (the
# W1/W3 FIN held W2's release 2.4 us after the last GEMM in session 51: is it the ticket, the partials' loads or the
# stores?), default and with FIN_UP "down" (built in session 51, untimed: the W2 programs make their own input
# slices, the up launch has no FIN): its GPU bit test and the step at C = 1 paired with it.
# (session 52: the FIN_UP step before verify, so a short call times it first. Its steps then ran inline in four calls,
# data/h100-2026-12-07-session52, and FIN_UP was removed after them: its steps here now stop at "unknown key".)
#   run(command="KB_TOTAL_S=540 KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session52a.sh", carry=[".whl", ".gpu_peers"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-540}
source scripts/device_lib.sh || exit 1
if grep -q "H200" "$W/environment.txt"; then   # the card issue 9 names first: its table and verify (~380 s)
    issue9_table_on_h200
    step verify9 200 $KB verify moe_gate moe_experts shared_expert moe_layer --impl triton --device cuda \
        --shapes flash-tp8 --examples 3
fi
# limits for a cold machine (session 51's call 2 lost its GPU tests, verify and step to 90 / 120 / 60 s limits)
step gpu_trace 150 python3 -m pytest -q -m gpu -p no:cacheprovider -rs tests/test_trace.py tests/test_moe.py \
    -k "traced or one_row or gate or w2_input"
# config FIN_UP "down" (session 51, untimed): the W2 programs make their input slices, no FIN in the up launch
step step_finup 120 $KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 1 --steps 30 \
    --try 'moe_routed@T=1={"FIN_UP": "down"}' --json "$W/step_finup.json"
# the one-token config paths not yet verified on a GPU: FIN_UP "down", ROUTE_SORT "slots" on the one-row tile
step verify1 170 $KB verify moe_layer moe_routed --impl triton --device cuda --shapes flash-tp8 --where T=1 \
    --examples 2
step timeline_routed 80 python3 scripts/moe_timeline.py --device cuda --op moe_routed --tokens 1 --replays 10 \
    --pin '{"FIN_UP": "down"}' --json "$W/timeline_routed.json"
step step_slots 120 $KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 1 --steps 30 \
    --try 'moe_routed@T=1={"ROUTE_SORT": "slots"}' --json "$W/step_slots.json"
finish
