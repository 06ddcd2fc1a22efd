#!/usr/bin/env bash
# The integrated GPU call of 2026-12-01 (issues 9-13, 17, 18): GPU tests, verify of every changed op on
# the H200 at Flash TP8 shapes, old vs new side by side (MoE, fp8_linear, mHC), the full 43-layer decode
# bench with per-op attribution, top-k tie agreement on CUDA, fidelity (substitute kernels: the tilelang
# wheel and its dependencies do not fit the 64 MiB the call may carry), the pytest plugin, the report.
#   run(command="KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session2.sh", carry=[".whl", ".gpu_official"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-560}
source scripts/device_lib.sh || exit 1
step verify 150 sh -c "$KB verify moe_gate moe_experts shared_expert moe_layer fp8_linear mhc_post_pre_norm mhc_post_pre \
    head_rms_norm_rope indexer_topk lm_head bf16_linear fp4_linear --device cuda --shapes flash-tp8 --examples 3 \
    --time-budget 3 --json > $W/verify.json"
step bench 110 $KB bench moe_experts moe_layer fp8_linear mhc_post_pre_norm mhc_post_pre rms_norm --shapes flash-tp8 \
    --batch 1 --batch 16 --batch 64 --max-time 0.2 --target-rse 0.03 --max-sets 64 --run-tag session2 --json "$W/bench.json"
step decode_flash 150 $KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 1,16,64 --profile \
    --json "$W/decode_flash.json"
step gpu_tests 60 python3 -m pytest -q -p no:cacheprovider -m gpu tests
step ties 20 python3 scripts/topk_tie_agreement.py --contexts 2048 65536 --rows 32 --devices cpu cuda --out "$W/ties.json"
step fidelity 60 sh -c "$KB make-checkpoint /tmp/fid-tiny --config tiny --seed 0 >/dev/null && \
    $KB fidelity --official .gpu_official/inference --checkpoint /tmp/fid-tiny --device cuda --impl triton \
    --kernels substitute --prompts 3 --prefill 64 --steps 16 --json $W/fidelity_triton.json"
step plugin 40 sh -c "mkdir -p /tmp/u && printf 'def test_norm(kernel_bench):\n    kernel_bench(\"rms_norm\", \"triton\", {\"M\": 4, \"N\": 4096})\n' > /tmp/u/test_user.py && cd /tmp/u && python3 -m pytest -q -p no:cacheprovider test_user.py --benchmark-json $W/plugin_bench.json --kb-db sqlite:///$W/plugin.sqlite"
step report 30 $KB report --out "$W/report.html"
finish
