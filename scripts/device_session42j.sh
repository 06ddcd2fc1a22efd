#!/usr/bin/env bash
# Session 42, call 11: attention_front's default from 16 rows (the BM 16 tile with its tails launched, call 10: the
# step at C = 16 0.050 ms faster) verified on the GPU at 16 / 64 rows, and the new defaults' step once more against
# the old attention_front config pinned back at 16 rows.
#   run(command="KB_TOTAL_S=150 KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session42j.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-150}
source scripts/device_lib.sh || exit 1
step verify 45 $KB verify attention_front --impl triton --device cuda --shapes flash-tp8 --examples 1 --time-budget 3 \
    --where M=16,64
OLD_FRONT='{"BM": 16, "SPLIT": 8, "num_stages": 3, "RB": 16, "Q_NORM": "chunks", "TAIL": "ticket"}'
step revert16 60 $KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 16 --steps 30 \
    --try "attention_front@M=16=$OLD_FRONT" --json "$W/revert16.json"
finish
