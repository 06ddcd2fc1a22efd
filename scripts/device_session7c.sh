#!/usr/bin/env bash
# Session 7's fourth H200 call (2026-12-02): the largest non-MoE ops of the step run on their defaults at every C
# (call 3's config report: mhc_post_pre_norm 1.055 ms per step at C = 64, attention_front 0.808, attention_q 0.488,
# grouped_wo_a 0.383). Verify them into this call's database, tune them at C = 1 / 16 / 64 into a copy of the
# packaged tuned file, then the 43-layer step on that file with the paired, interleaved --ablate-tuned: which new
# entries help the step. Last, the GPU test of tp_nccl (its attribution now runs after all timing).
#   run(command="KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session7c.sh", carry=[".whl", ".gpu_peers"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-440}
source scripts/device_lib.sh || exit 1
cp kernelbench/tuned/v1.json "$W/tuned.json"
OPS="mhc_post_pre_norm attention_front attention_q grouped_wo_a"
step calibrate 15 $KB calibrate --measure copy_gbps
step verify 90 sh -c "$KB verify $OPS --impl triton --device cuda --shapes flash-tp8 --examples 2 --time-budget 3 \
    --json > $W/verify.json"
step tune 170 $KB tune $OPS --impl triton --shapes flash-tp8 --batch 1 --batch 16 --batch 64 --max-trials 6 \
    --budget 160 --export "$W/tuned.json"
step decode_flash 145 env KERNELBENCH_TUNED="$W/tuned.json" $KB decode-bench --device cuda --impl triton --graph on \
    --layers flash --batches 1,16,64 --ablate-tuned --json "$W/decode_flash.json"
step gpu_tests 45 python3 -m pytest -q -p no:cacheprovider -o addopts="" -m gpu tests/test_tp_nccl.py
finish
