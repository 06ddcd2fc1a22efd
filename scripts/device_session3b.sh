#!/usr/bin/env bash
# Follow-up H200 call of the third 2026-12-01 session: what the integrated call (device_session3.sh) cut by
# its time limits: fidelity at Flash widths against DeepSeek's official code (substitute kernels), the
# moe_layer peer and previous-kernel rows, and the tp_nccl GPU test after its attribution assertion change.
#   run(command="KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session3b.sh", carry=[".whl", ".gpu_official", ".gpu_peers"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-290}
source scripts/device_lib.sh || exit 1
step ck_flash4 100 $KB make-checkpoint /tmp/fid-flash4 --config flash --layers 4 --experts 8 --vocab 4096 --seed 0 --force
step fidelity_flash4 110 $KB fidelity --official "$KB_OFFICIAL" --checkpoint /tmp/fid-flash4 --device cuda --impl triton \
    --kernels substitute --prompts 3 --prefill 300 --steps 32 --json "$W/fidelity_flash4_triton.json"
step tp_test 35 python3 -m pytest -q -p no:cacheprovider -o addopts="" -m gpu tests/test_tp_nccl.py
step bench_moe_layer 40 $KB bench moe_layer --impl triton_kernels --impl triton_v1 --shapes flash-tp8 --batch 1 --batch 16 \
    --batch 64 --max-time 0.2 --target-rse 0.03 --max-sets 32 --run-tag session3 --json "$W/bench_moe_layer.json"
finish
