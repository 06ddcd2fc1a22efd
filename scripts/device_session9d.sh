#!/usr/bin/env bash
# Session 9's fourth H200 call (2026-12-02): every GPU-marked test on the new MoE default, and the sweep r6 (K splits
# at C = 64 around it).
#   run(command="KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session9d.sh", carry=[".whl", ".gpu_peers"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-300}
source scripts/device_lib.sh || exit 1
step gpu_tests 170 python3 -m pytest -q -p no:cacheprovider -o addopts="" -m gpu tests
step moe_sweep 90 python3 scripts/moe_sweep.py --sweep r6 --baselines triton_v4 --warm 8 --max-time 0.06 \
    --cases moe_layer:64 moe_experts:64 --json "$W/moe_sweep.json"
finish
