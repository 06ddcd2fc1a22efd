#!/usr/bin/env bash
# Session 12, call 5: K splits of the routed launches as the step runs them (moe_routed, shared expert beside) at
# C = 64 / 16 (scripts/moe_sweep.py --sweep r9, same inputs for every config).
#   run(command="KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session12e.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-300}
source scripts/device_lib.sh || exit 1
step sweep 260 python3 scripts/moe_sweep.py --cases moe_routed:64 moe_routed:16 --sweep r9 --baselines --warm 10 \
    --max-time 0.4 --json "$W/sweep.json"
finish
