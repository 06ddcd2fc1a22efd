#!/usr/bin/env bash
# Session 42, call 9: this session's two defaults judged on one card the other way round: the step as it now runs
# against the old configs pinned back at their keys (attention_q at 16 rows: the fused kernel; attention_front at 64
# rows: BM 16, SPLIT 2, 3 stages, the in-kernel tails), C = 16 / 64, 30 interleaved pairs, A/A control first. A trial
# "slower" means the shipped default is faster.
#   run(command="KB_TOTAL_S=150 KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session42h.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-150}
source scripts/device_lib.sh || exit 1
OLD_FRONT='{"BM": 16, "SPLIT": 2, "num_stages": 3, "RB": 16, "Q_NORM": "chunks", "TAIL": "ticket"}'
step revert 120 $KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 16,64 --steps 30 \
    --try 'attention_q@M=16={"PATH": "fused"}' --try "attention_front@M=64=$OLD_FRONT" --json "$W/revert.json"
finish
