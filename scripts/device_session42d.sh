#!/usr/bin/env bash
# Session 42, call 4: attention_front's new default from 64 rows (BM 64, SPLIT 4, 4 stages, TAIL "launch") verified on
# the GPU; then the other two fused GEMMs with a per-head tail at 16 / 64 tokens with 32- / 64-row tiles (attention_q:
# wq_b 4 MB at K = 1024, default BM 16 / SPLIT 1 at 64 tokens, 10.6 us in session 38's H100 step; indexer_q: 8 MB,
# 18.2 us there), side by side with their defaults.
#   run(command="KB_TOTAL_S=200 KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session42d.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-200}
source scripts/device_lib.sh || exit 1
step verify_front 40 $KB verify attention_front --impl triton --device cuda --shapes flash-tp8 --examples 1 \
    --time-budget 3 --where M=64
G='"BN": 64, "num_warps": 8, "RB": 16'
tries=()
for t in '"BM": 16, "SPLIT": 2, "num_stages": 3' '"BM": 32, "SPLIT": 1, "num_stages": 3' \
         '"BM": 32, "SPLIT": 2, "num_stages": 3' '"BM": 64, "SPLIT": 1, "num_stages": 3' \
         '"BM": 64, "SPLIT": 2, "num_stages": 3' '"BM": 64, "SPLIT": 4, "num_stages": 3' \
         '"BM": 64, "SPLIT": 2, "num_stages": 4' '"BM": 64, "SPLIT": 2, "num_stages": 3, "RB": 4'; do
    tries+=(--try "attention_q={$G, $t}")
done
step attention_q 70 $KB bench attention_q --impl triton --shapes flash-tp8 --where M=16,64 --max-time 0.15 \
    "${tries[@]}" --json "$W/attention_q.json"
I='"BN": 64, "num_warps": 8, "RB": 16, "PATH": "fused", "EPI_WARPS": 2'
step indexer_q 60 $KB bench indexer_q --impl triton --shapes flash-tp8 --where T=16,64 --where Hi=64 --max-time 0.15 \
    --try "indexer_q={$I, \"BM\": 32, \"SPLIT\": 1, \"num_stages\": 3}" \
    --try "indexer_q={$I, \"BM\": 32, \"SPLIT\": 2, \"num_stages\": 3}" \
    --try "indexer_q={$I, \"BM\": 64, \"SPLIT\": 1, \"num_stages\": 3}" \
    --try "indexer_q={$I, \"BM\": 64, \"SPLIT\": 2, \"num_stages\": 3}" \
    --try "indexer_q={$I, \"BM\": 64, \"SPLIT\": 4, \"num_stages\": 4}" --json "$W/indexer_q.json"
finish
