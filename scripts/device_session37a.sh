#!/usr/bin/env bash
# Next session's first call (written in session 36, which had no device: new loans were paused). PREFETCH "staged"
# (session 36: x through the compiler's load pipeline and the scales a step ahead in the fp8 GEMM loops; bit-equal,
# not yet run on a GPU): its GPU tests and verify on every op that takes it, then the op rows at the tensor-core keys
# beside the tuned configs (bench --try: same inputs), then the step judged in interleaved pairs at C = 16 / 64
# (indexer_q runs PATH "split" at the step's 8 heads a rank, its GEMM fp8_linear's, which the fp8_linear pin covers).
# Beside, in the op rows only (the step at 64 tokens never looks this key up: its fp8_linear keys are 4096 x 1024,
# 256 x 4096 and 4096 x 256): fp8_linear at 4096 x 4096 on its default (PATH v1) instead of the tile borrowed from the
# 4096 x 2048 entry (no entry of its own; session 35's confounded XQ row on an H100 had v1's default 15.99 vs a
# borrowed tile's 17.67 us). Then
# what session 35 left for session 36's first call (scripts/device_session36a.sh, never run): bench --try's repeated
# trial on a GPU, the step's attribution at C = 1 / 16 / 64 (non-MoE time per layer, issue 17), and the copy ceiling.
# The card that comes is recorded (environment.txt).
#   run(command="KB_TOTAL_S=580 KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session37a.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-580}
source scripts/device_lib.sh || exit 1
STAGED='{"PREFETCH": "staged"}'
step copy 40 $KB calibrate --measure copy_gbps
step gpu_tests 90 python3 -m pytest -q -m gpu tests/test_bench_try.py tests/test_linear.py tests/test_front.py
step verify_fp8 120 $KB verify fp8_linear attention_front attention_q indexer_q --impl triton --device cuda \
    --shapes flash-tp8 --examples 1 --time-budget 4
step ops_staged 110 $KB bench fp8_linear attention_front attention_q --impl triton --shapes flash-tp8 \
    --where M=16,64 --max-time 0.2 --try "fp8_linear@M=16,64=$STAGED" --try "attention_front@M=16,64=$STAGED" \
    --try "attention_q@M=16,64=$STAGED" --try 'fp8_linear@M=64@N=4096@K=4096={}' --json "$W/ops_staged.json"
step step_staged 150 $KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 16,64 \
    --steps 30 --try "fp8_linear@M=16,64=$STAGED;attention_front@M=16,64=$STAGED;attention_q@M=16,64=$STAGED" \
    --json "$W/step_staged.json"
step step_attr 100 $KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 1,16,64 \
    --json "$W/step_attr.json"
finish
