#!/usr/bin/env bash
# Written for the next session; it ran as session 36's call 1 (KB_TOTAL_S=480, an H100: data/h100-2026-12-05-session36/
# call1), the device having come at the end of session 36 after all. Two opt-in configs
# built in session 36, bit-equal to the defaults and compiled clean for sm_90 / sm_120, not yet run on a GPU then:
#  - PREFETCH "staged" (the fp8 GEMM loops: x through the compiler's load pipeline, the scales a step ahead) in
#    fp8_linear, attention_front, attention_q and indexer_q's fused path;
#  - SHARED_SCALES "ahead" (the fused shared expert items of the grouped MoE launches, one token: their weight-scale
#    bytes a K block ahead).
# First verify on the GPU (every config path of those ops), then the op rows beside the default / tuned configs on the
# same inputs (bench --try), then the step judged in interleaved pairs (decode-bench --try). indexer_q runs PATH
# "split" at the step's 8 heads a rank (its GEMM fp8_linear's, which the fp8_linear pin covers). Beside, in the op rows
# only (the step at 64 tokens looks fp8_linear up at 4096 x 1024, 256 x 4096 and 4096 x 256 only): fp8_linear at
# 4096 x 4096 on its default (PATH v1) instead of the tile borrowed from the 4096 x 2048 entry (no entry of its own;
# session 35's confounded XQ row on an H100 had v1's default 15.99 vs a borrowed tile's 17.67 us). The card that
# comes is recorded (environment.txt). Then scripts/device_session37b.sh.
#   run(command="KB_TOTAL_S=580 KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session37a.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-580}
source scripts/device_lib.sh || exit 1
STAGED='{"PREFETCH": "staged"}'
AHEAD='{"SHARED_SCALES": "ahead"}'
step copy 30 $KB calibrate --measure copy_gbps
step verify 110 $KB verify fp8_linear attention_front attention_q indexer_q moe_layer moe_routed --impl triton \
    --device cuda --shapes flash-tp8 --examples 1 --time-budget 3
step ops_fp8 120 $KB bench fp8_linear attention_front attention_q --impl triton --shapes flash-tp8 \
    --where M=16,64 --max-time 0.2 --try "fp8_linear@M=16,64=$STAGED" --try "attention_front@M=16,64=$STAGED" \
    --try "attention_q@M=16,64=$STAGED" --try 'fp8_linear@M=64@N=4096@K=4096={}' --json "$W/ops_fp8.json"
step ops_moe 40 $KB bench moe_layer --impl triton --shapes flash-tp8 --where T=1 --max-time 0.3 \
    --try "moe_layer@T=1=$AHEAD" --json "$W/ops_moe.json"
step step_moe 80 $KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 1 --steps 30 \
    --try "moe_routed@T=1=$AHEAD" --json "$W/step_moe.json"
step step_staged 150 $KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 16,64 \
    --steps 30 --try "fp8_linear@M=16,64=$STAGED;attention_front@M=16,64=$STAGED;attention_q@M=16,64=$STAGED" \
    --json "$W/step_staged.json"
finish
