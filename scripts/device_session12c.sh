#!/usr/bin/env bash
# Session 12, call 3: same-call A/B of the MoE gate's tail. Variants of kernels/moe.py, swapped in the installed
# package (/tmp/kb, where device_env.sh puts it; call 2's swap in the checkout did not reach it):
#   B  = before (commit 8f74f68, carried as the untracked .ab_moe_before.py),
#   S  = the one-launch gate's slot sort from the top-k's registers (commit a40407a, .ab_moe_sort.py),
#   SW = S + the top-k weights in one reduction after the selection (this tree).
# GPU verify of SW's gate ops, then per variant in the order SW B S SW B S: `kernelbench bench moe_routed moe_layer` at C = 1,
# 16, 64 (first round only), and the 43-layer step at C = 1 with its per-kernel table (--kernels).
# The .ab_moe_*.py files were untracked copies made before the call: `git show 8f74f68:kernels/moe.py >
# .ab_moe_before.py; git show a40407a:kernels/moe.py > .ab_moe_sort.py` (untracked, not ignored: they travel).
#   run(command="KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session12c.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-570}
source scripts/device_lib.sh || exit 1
INSTALLED=$(installed kernels/moe.py)
[ -f "$INSTALLED" ] || { echo "no installed $INSTALLED"; exit 1; }
cp kernels/moe.py "$W/moe_SW.py"
cp .ab_moe_sort.py "$W/moe_S.py"
cp .ab_moe_before.py "$W/moe_B.py"
step verify 100 $KB verify moe_gate moe_layer moe_routed --impl triton --device cuda --shapes flash-tp8 --examples 2 \
    --time-budget 5
for round in 1 2; do
    for v in SW B S; do
        cp "$W/moe_$v.py" "$INSTALLED"
        if [ "$round" = 1 ]; then
            step "bench_${v}" 60 $KB bench moe_routed moe_layer --impl triton --shapes flash-tp8 --batch 1 \
                --batch 16 --batch 64 --max-time 0.3 --json "$W/bench_${v}.json"
        fi
        step "step_${v}${round}" 50 $KB decode-bench --device cuda --impl triton --graph on --layers flash \
            --batches 1 --kernels --json "$W/step_${v}${round}.json"
    done
done
cp "$W/moe_SW.py" "$INSTALLED"
finish
