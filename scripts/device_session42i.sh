#!/usr/bin/env bash
# Session 42, call 10: three more candidates in the step, each pinned at one key (30 interleaved pairs, A/A control
# first): attention_q's PATH "split" at 64 rows (11.45 against 12.37 us alone on the H100, call 5; within the
# control's shift on the H200, call 6), and attention_front at 16 rows with its tails launched on BM 16 / SPLIT 8
# (13.31 us alone against the default's 14.99, call 2) and on BM 32 / SPLIT 4 / 4 stages (13.51).
#   run(command="KB_TOTAL_S=130 KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session42i.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-130}
source scripts/device_lib.sh || exit 1
L='"RB": 4, "Q_NORM": "row", "TAIL": "launch"'
step more 110 $KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 16,64 --steps 30 \
    --try 'attention_q@M=64={"PATH": "split"}' \
    --try "attention_front@M=16={\"BM\": 16, \"SPLIT\": 8, \"num_stages\": 3, $L}" \
    --try "attention_front@M=16={\"BM\": 32, \"SPLIT\": 4, \"num_stages\": 4, $L}" --json "$W/more.json"
finish
