#!/usr/bin/env bash
# Session 20, call 3: the gate's top-k as places from one packed key (kernels/moe.py _topk_slots, commit 9a07f60)
# against the previous top-k ("b": kernels/moe.py of the commit before, carried untracked as scripts/ab/moe_before.py),
# with the Hadamard butterfly now the default in both: (0) the GPU tests of the MoE file (graph capture, GATE "mma",
# the packed key compiled); (1) verify of the gate ops; (2) moe_layer's bench and (3) the 43-layer step, new "n"
# against before "b", A B A B; (4) a what-if for the next change: mhc_post_pre_norm's second launch at T = 1 with
# its Sinkhorn program doing nothing (timing only: post / comb stay unwritten), Nsight Compute durations.
#   run(command="KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session20c.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-560}
source scripts/device_lib.sh || exit 1
MOE="$(installed kernels/moe.py)"
cp "$MOE" "$W/moe_new.py"
step gputests 60 python3 -m pytest -q -p no:cacheprovider tests/test_moe.py -m gpu
step slots 40 python3 -m pytest -q -p no:cacheprovider tests/test_moe.py -k topk_slots
step verify 100 $KB verify moe_gate moe_routed moe_layer --impl triton --device cuda --shapes flash-tp8 --examples 2 \
    --time-budget 6
LAYER="$KB bench moe_layer --impl triton --shapes flash-tp8 --batch 1 --batch 16 --batch 64 --max-time 0.4"
DB="$KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 1,16,64"
for r in 1 2; do
    cp "$W/moe_new.py" "$MOE"; step n$r $(( r == 1 ? 100 : 45 )) $DB --json "$W/n$r.json"
    cp scripts/ab/moe_before.py "$MOE"; step b$r $(( r == 1 ? 80 : 45 )) $DB --json "$W/b$r.json"
done
step_times n1 b1 n2 b2
cp "$W/moe_new.py" "$MOE"; step layer_n 45 $LAYER --json "$W/layer_n.json"
cp scripts/ab/moe_before.py "$MOE"; step layer_b 45 $LAYER --json "$W/layer_b.json"
cp "$W/moe_new.py" "$MOE"
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
SOL="$NCU --profile-from-start off --clock-control none -k regex:_mhc_ --section SpeedOfLight --csv --page details"
MHC="python3 scripts/profile_op.py mhc_post_pre_norm --batch 1 --batch 16"
variant_of kernels/mhc.py mhc_orig mhc_nosk 's/^    elif not HEAD:$/    elif False:/'
step mhc_orig1 30 $SOL $MHC
use_variant kernels/mhc.py mhc_nosk; step mhc_nosk1 30 $SOL $MHC
use_variant kernels/mhc.py mhc_orig; step mhc_orig2 30 $SOL $MHC
use_variant kernels/mhc.py mhc_nosk; step mhc_nosk2 30 $SOL $MHC
use_variant kernels/mhc.py mhc_orig
for f in mhc_orig1 mhc_nosk1 mhc_orig2 mhc_nosk2; do echo "== $f"; python3 scripts/ncu_summary.py "$W/$f.log"; done \
    > "$W/mhc_summary.txt" 2>&1
rm -f "$W"/moe_new.py "$W"/mhc_*.py
finish
