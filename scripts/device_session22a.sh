#!/usr/bin/env bash
# Prepared in session 21 for the next session (not yet run): time the one-launch gate's slot sort from registers
# (config ROUTE_SORT "slots", commit 9a96ea5; built without a GPU). (1) verify moe_layer / moe_routed on the GPU (the
# config space carries the "slots" entry up to 4 tokens, so every path runs); (2) moe_routed and moe_layer at one
# token, default (d) against "slots" pinned (s), d s d s; (3) the 43-layer step at C = 1, d s d s (the pin is for
# C <= 4 only: with the GEMM gate above that, "slots" is refused).
#   run(command="KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session22a.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-420}
source scripts/device_lib.sh || exit 1
step verify 120 $KB verify moe_layer moe_routed --impl triton --device cuda --shapes flash-tp8 --examples 2 \
    --time-budget 10
PIN='moe_routed={"ROUTE_SORT": "slots"};moe_layer={"ROUTE_SORT": "slots"}'    # hashed layers sort as "chunk"
B="$KB bench moe_routed moe_layer --impl triton --shapes flash-tp8 --batch 1 --max-time 0.5"
DB="$KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 1"
for r in 1 2; do
    step bd$r 60 $B --json "$W/bd$r.json"
    step bs$r 60 env KERNELBENCH_PIN_CONFIG="$PIN" $B --json "$W/bs$r.json"
done
step warm 60 $DB --json "$W/warm.json"
for r in 1 2; do
    step d$r 30 $DB --json "$W/d$r.json"
    step s$r 30 env KERNELBENCH_PIN_CONFIG="$PIN" $DB --json "$W/s$r.json"
done
step_times d1 s1 d2 s2
finish
