#!/usr/bin/env bash
# The next integrated GPU call (prepared in session 6 of 2026-12-01, which had no device time: its 162 s left could
# not start a machine and run anything). It measures what was merged without a GPU:
#  - verify on the H200 of the kernels touched since the last GPU verify: the MoE grouped GEMM (pair_codes_e4m3 /
#    _pair_half refactor, the retired tuned entries), the mHC projection kernels (_proj_tiles), compressor_step (the
#    exact-ratio lookup) and attention_q (the rel_fro cap 2^-8 + 2^-7);
#  - the 43-layer step with its config report (which config every kernel ran) and --ablate-tuned (the step again
#    without each op's tuned entries: the step-level check of tuned choices session 5's lessons asked for);
#  - MoE and compressor new vs previous kernels in the same run; fp8_linear tuned at C=64 (the keys the step borrows);
#  - the GPU tests of the touched families.
#   run(command="KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session6.sh", carry=[".whl", ".gpu_peers"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-560}
source scripts/device_lib.sh || exit 1
T="--max-time 0.1 --target-rse 0.03 --max-sets 32 --run-tag session6"
# in priority order; the limits add up to more than TOTAL, so the last steps get what is left (or a second call)
step calibrate 15 $KB calibrate --measure copy_gbps
step verify 150 sh -c "$KB verify moe_experts moe_layer compressor_step attention_q mhc_pre mhc_post_pre \
    mhc_post_pre_norm --impl triton --device cuda --shapes flash-tp8 --examples 3 --time-budget 3 --json > $W/verify.json"
step decode_flash 230 $KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 1,16,64 --profile \
    --ablate-tuned --json "$W/decode_flash.json"
step bench_moe 60 $KB bench moe_layer moe_experts compressor_step --impl triton --impl triton_v3 --impl triton_v2 \
    --impl triton_kernels --shapes flash-tp8 --batch 1 --batch 16 --batch 64 $T --json "$W/bench_moe.json"
step tune_fp8 90 $KB tune fp8_linear --shapes flash-tp8 --batch 64 --budget 80 --export "$W/tuned_fp8_c64.json"
step gpu_tests 80 python3 -m pytest -q -p no:cacheprovider -o addopts="" -m gpu tests/test_moe.py tests/test_mhc.py \
    tests/test_compressor.py tests/test_front.py tests/test_decode_bench.py tests/test_foundation.py
finish
