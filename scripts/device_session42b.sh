#!/usr/bin/env bash
# Session 42, call 2 (after call 1: attention_front with its tails launched, BM 32 / 64 at SPLIT 4, 15.5 us at 64
# tokens against the default's 19.5 on an H100; the 64-token tune ran out of time before its export): the TAIL
# "launch" tiles side by side at 16 / 64 tokens (BM 16 / 32 / 64, SPLIT 2 / 4 / 8, 3 / 4 stages), then three of them
# judged in the 43-layer step at C = 16 / 64 against the step as it runs.
#   run(command="KB_TOTAL_S=330 KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session42b.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-330}
source scripts/device_lib.sh || exit 1
L='"BN": 64, "num_warps": 8, "RB": 4, "Q_NORM": "row", "TAIL": "launch"'
tries=()
for t in '"BM": 32, "SPLIT": 2, "num_stages": 4' '"BM": 32, "SPLIT": 4, "num_stages": 3' \
         '"BM": 32, "SPLIT": 4, "num_stages": 4' '"BM": 32, "SPLIT": 8, "num_stages": 3' \
         '"BM": 64, "SPLIT": 2, "num_stages": 4' '"BM": 64, "SPLIT": 4, "num_stages": 4' \
         '"BM": 16, "SPLIT": 4, "num_stages": 3' '"BM": 16, "SPLIT": 8, "num_stages": 3'; do
    tries+=(--try "attention_front={$t, $L}")
done
step front 100 $KB bench attention_front --impl triton --shapes flash-tp8 --where M=16,64 --where compressed=False \
    --max-time 0.15 "${tries[@]}" --json "$W/front.json"
step step_front 150 $KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 16,64 --steps 30 \
    --try "attention_front={\"BM\": 32, \"SPLIT\": 4, \"num_stages\": 3, $L}" \
    --try "attention_front={\"BM\": 64, \"SPLIT\": 4, \"num_stages\": 4, $L}" \
    --try "attention_front={\"BM\": 32, \"SPLIT\": 2, \"num_stages\": 4, $L}" --json "$W/step_front.json"
finish
