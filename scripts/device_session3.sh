#!/usr/bin/env bash
# The integrated GPU call of the 2026-12-01 third session (issues 9, 10, 11, 14, 15, 17): verify of every op
# changed this session on the H200 at Flash TP8 shapes, the full 43-layer decode step with per-op attribution,
# new vs previous kernels (and the triton_kernels MoE peer) side by side, the GPU tests, fidelity at Flash
# widths against DeepSeek's official code (substitute kernels), and the one-GPU NCCL dry run of tp_nccl.
#   run(command="KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session3.sh",
#       carry=[".whl", ".gpu_official", ".gpu_peers"])
# .gpu_official holds the official inference/ folder, .gpu_peers/triton_kernels the peer's source (never committed).
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-580}
source scripts/device_lib.sh || exit 1
T="--max-time 0.2 --target-rse 0.03 --max-sets 32"
step calibrate 15 $KB calibrate --measure copy_gbps
step verify 160 sh -c "$KB verify moe_gate moe_experts shared_expert moe_layer attention_front attention_q head_rms_norm_rope \
    kv_write attention_indices sparse_attention grouped_wo_a bf16_linear lm_head fp8_linear indexer_topk compressor_step \
    mhc_post_pre_norm --impl triton --device cuda --shapes flash-tp8 --examples 3 --time-budget 3 --json > $W/verify.json"
step decode_flash 140 $KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 1,16,64 --profile \
    --json "$W/decode_flash.json"
step bench_moe 60 $KB bench moe_experts moe_layer --impl triton --impl triton_v1 --impl triton_kernels --shapes flash-tp8 \
    --batch 1 --batch 16 --batch 64 $T --run-tag session3 --json "$W/bench_moe.json"
step bench_rest 55 $KB bench attention_front attention_q indexer_topk mhc_post_pre_norm compressor_step --impl triton \
    --impl triton_parts --impl triton_v1 --shapes flash-tp8 --batch 1 --batch 64 --context 512 $T --run-tag session3 \
    --json "$W/bench_rest.json"
step gpu_tests 60 python3 -m pytest -q -p no:cacheprovider -o addopts="" -m gpu tests
step ties 25 env TRITON_INTERPRET=0 python3 -m pytest -q -p no:cacheprovider -o addopts="" tests/test_norm_rope.py \
    tests/test_indexer.py -k "q_norm or ties or weight_products or deepseeks"
step fidelity 55 sh -c "$KB make-checkpoint /tmp/fid-flash4 --config flash --layers 4 --experts 8 --vocab 4096 --seed 0 \
    --force >/dev/null && $KB fidelity --official $KB_OFFICIAL --checkpoint /tmp/fid-flash4 --device cuda --impl triton \
    --kernels substitute --prompts 3 --prefill 300 --steps 32 --json $W/fidelity_flash4_triton.json"
step tp_dryrun 45 bash scripts/tp_nccl_dryrun.sh "$W/tpnccl"
step peer_verify 30 sh -c "$KB verify moe_experts --impl triton_kernels --device cuda --shapes flash-tp8 --examples 3 \
    --time-budget 5 --json > $W/peer_verify.json"
step report 15 sh -c "$KB gate --baseline $W/bench_moe.json --current $W/bench_moe.json && $KB report --out $W/report.html"
finish
