#!/usr/bin/env bash
# Session 9's first H200 call (2026-12-02): (1) the MoE sweep r4 (scripts/moe_sweep.py: BM 8 slot tiles with the
# shared expert's own token tile BM_SHARED, and BDIAG, beside today's default on the same inputs) at moe_layer C = 64 /
# 16 / 1 and moe_experts C = 64; (2) the 43-layer Flash step at C = 1 and 64K / 1M tokens of context, with the split
# top-k (SEGMENTS "auto", the default) and with the one-program top-k (SEGMENTS 1), the indexer's other keys pinned to
# the packaged T = 1 entry in both runs.
#   run(command="KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session9.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-560}
source scripts/device_lib.sh || exit 1
step calibrate 15 $KB calibrate --measure copy_gbps
step moe_sweep 250 python3 scripts/moe_sweep.py --sweep r4 --baselines --warm 15 --max-time 0.06 \
    --cases moe_layer:64 moe_layer:16 moe_experts:64 moe_layer:1 --json "$W/moe_sweep.json"
IDX='"BLOCK_S": 64, "SCAN": 4096, "TOPK_WARPS": 16, "num_stages": 3, "num_warps": 8, "waves": 2'
step step_long_split 140 env KERNELBENCH_PIN_CONFIG="indexer_topk={$IDX, \"SEGMENTS\": \"auto\"}" $KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 1 \
    --contexts 65536,1048576 --json "$W/step_long_split.json"
step step_long_one 140 env KERNELBENCH_PIN_CONFIG="indexer_topk={$IDX, \"SEGMENTS\": 1}" $KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 1 \
    --contexts 65536,1048576 --json "$W/step_long_one.json"
finish
