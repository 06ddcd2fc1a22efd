#!/usr/bin/env bash
# Session 35, call 2 (after call 1 on an H200: GATE_WARPS 8 faster at the op, level in the step; bench --try's GPU test
# failed on its own row filter). GATE_WARPS 8 is now the default: the GPU tests it touches (MoE, bench --try, PDL), its
# verify at one token, and the same-run A/B against the old 4 warps (bench --try). Then the C = 16 / 64 gate: the
# routing launch's warps (ROUTE_WARPS 1 / 2 against 4; its 64 top-k programs reduce block-wide) at the op and in the
# step, and the gate GEMM's bf16_linear tile at M = 64 tuned, then judged in the step (--try-entries, --keep-faster).
#   run(command="KB_TOTAL_S=580 KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session35b.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-580}
source scripts/device_lib.sh || exit 1
step gpu_tests 150 python3 -m pytest -q -m gpu tests/test_moe.py tests/test_bench_try.py tests/test_pdl.py
step verify1 100 $KB verify moe_gate moe_layer moe_routed --impl triton --device cuda --shapes flash-tp8 --batch 1 \
    --examples 2 --time-budget 8
step gw4 40 $KB bench moe_gate moe_layer --impl triton --shapes flash-tp8 --batch 1 --max-time 0.5 \
    --try 'moe_gate={"GATE_WARPS": 4}' --try 'moe_layer={"GATE_WARPS": 4}' --json "$W/gw4.json"
step rw 60 $KB bench moe_layer moe_routed --impl triton --shapes flash-tp8 --batch 16 --batch 64 --where hash=False \
    --max-time 0.3 --try 'moe_layer={"ROUTE_WARPS": 1}' --try 'moe_layer={"ROUTE_WARPS": 2}' \
    --try 'moe_routed={"ROUTE_WARPS": 1}' --try 'moe_routed={"ROUTE_WARPS": 2}' --json "$W/rw.json"
step tune_gate 80 $KB tune bf16_linear --shapes flash-tp8 --where M=64 --where N=256 --max-trials 16 --budget 60 \
    --export "$W/gate_tuned.json"
entries=()    # the tuned gate tile, when the tune exported one
if [ -s "$W/gate_tuned.json" ]; then entries=(--try-entries "$W/gate_tuned.json" --keep-faster "$W/gate_keep.json"); fi
step trial_step 130 $KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 1,16,64 --steps 30 \
    --try 'moe_routed@T=16,64={"ROUTE_WARPS": 2}' --try 'moe_routed@T=16,64={"ROUTE_WARPS": 1}' "${entries[@]}" \
    --json "$W/trial_step.json"
finish
