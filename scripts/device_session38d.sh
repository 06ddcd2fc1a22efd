#!/usr/bin/env bash
# Ran as session 38's call 1 on an H100 (data/h100-2026-12-06-session38/call1, tree 572fcf6). The three prefetch configs
# it times were removed afterwards, all slower in the step (docs/perf/h100-2026-12-06-session38.md): at HEAD their
# --try pins are refused as unknown keys. Session 38, first call (device time was short: the starts kept failing):
# what must be true before anything else, then this session's one-token MoE prefetch configs timed.
#  1. GPU verify of the config paths session 36 could not verify on a device (attention_front's PREFETCH "staged",
#     indexer_q's fused path with it, moe_routed's SHARED_SCALES "ahead") and of the new W2_PREFETCH / GATE_PREFETCH
#     entries (moe_routed's covering set, and moe_layer's at one token);
#  2. the GPU tests of bench --try, fp8_linear, the MoE (the new prefetches bit-equal, eager and graph-replayed) and
#     PDL;
#  3. W2_PREFETCH "routed", GATE_PREFETCH "experts" and UP_PREFETCH "span" (docs/perf/h100-2026-12-06-session38.md
#     says what they did): the op rows beside the default on the same inputs (bench --try), and the 43-layer step at
#     C = 1 in interleaved pairs.
#   run(command="KB_TOTAL_S=570 KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session38d.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-570}
source scripts/device_lib.sh || exit 1
W2='{"W2_PREFETCH": "routed"}'
GP='{"GATE_PREFETCH": "experts"}'
SPAN='{"UP_PREFETCH": "span"}'
ALL='{"W2_PREFETCH": "routed", "GATE_PREFETCH": "experts", "UP_PREFETCH": "span"}'
step copy 25 $KB calibrate --measure copy_gbps
step verify 130 $KB verify attention_front indexer_q moe_routed --impl triton --device cuda --shapes flash-tp8 \
    --examples 1 --time-budget 3
step verify_layer 40 $KB verify moe_layer --impl triton --device cuda --shapes flash-tp8 --where T=1 --examples 1 \
    --time-budget 3
step gpu_tests 130 python3 -m pytest -q -m gpu tests/test_bench_try.py tests/test_linear.py tests/test_moe.py \
    tests/test_pdl.py
step ops 75 $KB bench moe_layer moe_routed --impl triton --shapes flash-tp8 --where T=1 --max-time 0.3 \
    --try "moe_layer@T=1=$W2" --try "moe_layer@T=1=$GP" --try "moe_layer@T=1=$SPAN" --try "moe_layer@T=1=$ALL" \
    --try "moe_routed@T=1=$W2" --try "moe_routed@T=1=$GP" --try "moe_routed@T=1=$SPAN" --try "moe_routed@T=1=$ALL" \
    --json "$W/ops.json"
step step_pf 160 $KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 1 --steps 30 \
    --try "moe_routed@T=1=$GP" --try "moe_routed@T=1=$SPAN" --try "moe_routed@T=1=$ALL" --json "$W/step_pf.json"
finish
