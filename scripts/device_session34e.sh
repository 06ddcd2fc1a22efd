#!/usr/bin/env bash
# Session 34, call 5: moe_routed's GPU verify (call 4's was cut at 130 s inside it), and GATE_WARPS 8 judged in the
# step at C = 1 with more pairs (call 4: +0.007 ms, -0.001 .. +0.014, within noise; op level -0.5 us moe_gate).
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-300}
source scripts/device_lib.sh || exit 1
step verify_routed 150 $KB verify moe_routed --impl triton --device cuda --shapes flash-tp8 --examples 2 --time-budget 8
step trial_gw8 100 $KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 1,16 --steps 60 \
    --try 'moe_routed@T=1={"GATE_WARPS": 8}' --json "$W/trial_gw8.json"
finish
