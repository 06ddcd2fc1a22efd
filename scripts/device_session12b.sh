#!/usr/bin/env bash
# Session 12, call 2: the one-launch MoE gate sorting the slots from its top-k's registers (_sort_rows) instead of
# reloading the indices it just stored (two passes of .cg loads). GPU verify of the gate ops, then the same-call A/B:
# this tree's kernels/moe.py (A) against the file before the change (B, carried as the untracked .ab_moe_before.py),
# `kernelbench bench` at C = 1 and the 43-layer step at C = 1, in the order A B A B.
# NOT an A/B as written: the swap below changes the checkout, but device_env.sh has already installed the project into
# /tmp/kb, so every run imports the new code (data/h200-2026-12-02-session12/call2/README.md); device_session12c.sh
# swaps the installed file instead. .ab_moe_before.py was an untracked `git show 8f74f68:kernels/moe.py`.
#   run(command="KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session12b.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-560}
source scripts/device_lib.sh || exit 1
cp kernels/moe.py "$W/moe_after.py"
use() { cp "$1" kernels/moe.py; }
step verify 150 $KB verify moe_gate moe_layer moe_routed --impl triton --device cuda --shapes flash-tp8 --examples 2 \
    --time-budget 6
for round in 1 2; do
    for side in A B; do
        if [ "$side" = A ]; then use "$W/moe_after.py"; else use .ab_moe_before.py; fi
        step "bench_${side}${round}" 60 $KB bench moe_gate moe_layer moe_routed --impl triton --shapes flash-tp8 \
            --batch 1 --max-time 0.3 --json "$W/bench_${side}${round}.json"
        step "step_${side}${round}" 70 $KB decode-bench --device cuda --impl triton --graph on --layers flash \
            --batches 1 --json "$W/step_${side}${round}.json"
    done
done
use "$W/moe_after.py"
finish
