#!/usr/bin/env bash
# Ran as session 39's call 1 (H100, tree 8f1975c; data/h100-2026-12-06-session39/call1): slower in the step at every C,
# so the option was removed (code at 8f1975c); the script stays as the call's record. Written in session 38.
# Config SCALE_PREFETCH
# "span" (opt-in): the MoE grouped launches' routed items request their split's span of the weight-scale words into
# L2 before their K loop. The sm_90 SASS at one token (`kernelbench inspect moe_routed --target sm_90 --batch 1
# --loop-loads`) has the loop's scale words, loaded a K block ahead into registers, waited on at the copy into the
# loop-carried register ~300 of the W1/W3 loop's 332 instructions later (the W2 loop: 132-169 of 206), from HBM.
# Session 38's UP_PREFETCH "span" prefetched the weight codes, not these words, and was level alone. Verify (every
# covering config), the GPU test (bit-equal, eager and graph replay, 1 and 64 tokens), the op rows beside the
# default on the same inputs (bench --try), and the 43-layer step in interleaved pairs (decode-bench --try).
#   run(command="KB_TOTAL_S=480 KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session39a.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-480}
source scripts/device_lib.sh || exit 1
SPAN='{"SCALE_PREFETCH": "span"}'
step copy 25 $KB calibrate --measure copy_gbps
step verify 120 $KB verify moe_layer moe_routed --impl triton --device cuda --shapes flash-tp8 --examples 1 \
    --time-budget 3
step gpu_test 60 python3 -m pytest -q -m gpu tests/test_moe.py -k scale_prefetch
step ops 90 $KB bench moe_layer moe_routed --impl triton --shapes flash-tp8 --where hash=False --max-time 0.3 \
    --try "moe_layer=$SPAN" --try "moe_routed=$SPAN" --json "$W/ops.json"
step step_span 170 $KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 1,16,64 \
    --steps 30 --try "moe_routed=$SPAN" --json "$W/step_span.json"
finish
