#!/usr/bin/env bash
# Not run in session 41 (its last 81 s of device time could not start a machine): for the next lent card.
# attention_front at 64 tokens with 32- and 64-row blocks (the
# weights read once or twice instead of four times; call 5's random sample of the space drew no such entry with
# 16-row tail steps), with the q tail in one pass, against the default (BM 16, 19.12 us in call 5's tune).
#   run(command="KB_TOTAL_S=60 KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session41f.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-45}
source scripts/device_lib.sh || exit 1
B='"BN": 64, "SPLIT": 4, "num_stages": 3, "num_warps": 8, "RB": 16'
step front64 40 $KB bench attention_front --impl triton --shapes flash-tp8 --where M=64 --where compressed=False \
    --max-time 0.15 --try "attention_front={\"BM\": 64, $B}" --try "attention_front={\"BM\": 64, \"Q_NORM\": \"row\", $B}" \
    --try "attention_front={\"BM\": 32, \"Q_NORM\": \"row\", $B}" --json "$W/front64.json"
finish
