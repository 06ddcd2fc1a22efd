#!/usr/bin/env bash
# Session 53's second call: wo_a read as FP8 (kernels/linear.py prepare_wo_a; built in session 53 after call 1). On an
# H200 first issue 9's table. Then on any card: the GPU bit tests (the FP8 codes against the bf16 weight; COMBINE_TICKETS
# "live", now the default), grouped_wo_a and sparse_attention_wo_a alone beside their bf16 form (impl triton_bf16, same
# run, same inputs; two wider GEMV tiles for the 4 MB of codes as trials), and the 43-layer step at 1 / 16 / 64
# alternately with the bf16 wo_a (--use sparse_attention_wo_a=triton_bf16) and as it runs (the FP8 codes), twice each,
# the last with attribution.
#   run(command="KB_TOTAL_S=560 KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session53b.sh", carry=[".whl", ".gpu_peers"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-560}
source scripts/device_lib.sh || exit 1
issue9_table_on_h200
step gpu_woa 150 python3 -m pytest -q -m gpu -p no:cacheprovider -rs tests/test_wo_a_fp8.py tests/test_moe.py \
    -k "wo_a or combine_ticket"
GEMV='{"BM": 1, "BN": 64, "NB": 4, "SPLIT": 8, "num_warps": 8, "num_stages": 1}'
GEMV_WIDE='{"BM": 1, "BN": 128, "NB": 2, "SPLIT": 16, "num_warps": 8, "num_stages": 1}'
step bench_woa 100 $KB bench grouped_wo_a --impl triton --impl triton_bf16 --shapes flash-tp8 --max-time 0.3 \
    --try "grouped_wo_a@T=1=$GEMV" --try "grouped_wo_a@T=1=$GEMV_WIDE" --json "$W/bench_woa.json"
step bench_attn_woa 100 $KB bench sparse_attention_wo_a --impl triton --impl triton_bf16 --shapes flash-tp8 \
    --where ctx=512 --where kind=csa --max-time 0.3 --json "$W/bench_attn_woa.json"
for i in 1 2; do
    PROFILE=""; if [ "$i" = 2 ]; then PROFILE="--profile"; fi
    step "step_bf16_$i" 100 $KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 1,16,64 \
        --steps 30 --use sparse_attention_wo_a=triton_bf16 $PROFILE --json "$W/step_bf16_$i.json"
    step "step_fp8_$i" 100 $KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 1,16,64 \
        --steps 30 $PROFILE --json "$W/step_fp8_$i.json"
done
step_times step_bf16_1 step_fp8_1 step_bf16_2 step_fp8_2
finish
