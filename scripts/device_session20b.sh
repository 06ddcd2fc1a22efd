#!/usr/bin/env bash
# Session 20, call 2: (1) the Hadamard butterfly at C = 64 (call 1 timed C = 1, 16): decode-bench with the default
# sign matrix ("d") against KERNELBENCH_HADAMARD=butterfly ("f"), A B A B at C = 1, 16, 64; (2) where the C = 1
# main-lane launches spend their time, per SASS instruction (Nsight Compute source counters + warp states, the way
# session 19's call 3 found GATE "mma"'s serial top-k): the one-launch gate (_gate_fused_kernel), the grouped expert
# GEMMs, mhc_post_pre_norm's two launches and the attention front, each at T = 1; and one SpeedOfLight pass over the
# same ops' launches for their durations.
#   run(command="KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session20b.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-560}
source scripts/device_lib.sh || exit 1
DB="$KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 1,16,64"
for r in 1 2; do
    step d$r $(( r == 1 ? 90 : 40 )) $DB --json "$W/d$r.json"
    KERNELBENCH_HADAMARD=butterfly step f$r $(( r == 1 ? 70 : 40 )) $DB --json "$W/f$r.json"
done
step_times d1 f1 d2 f2
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
SRC="--section SourceCounters --section WarpStateStats --page source --print-source sass --csv"
NC="$NCU --profile-from-start off --clock-control none"
MOE="python3 scripts/profile_op.py moe_routed --batch 1 --where hash=False --where shared=True"
MHC="python3 scripts/profile_op.py mhc_post_pre_norm --batch 1"
FRONT="python3 scripts/profile_op.py attention_front --batch 1 --where compressed=False"
step sol 70 $NC --section SpeedOfLight --section WarpStateStats --section LaunchStats --csv --page details \
    python3 scripts/profile_op.py moe_routed mhc_post_pre_norm attention_front sparse_attention attention_q \
    grouped_wo_a --batch 1 --where hash=False --where shared=True --where compressed=False --where ctx=512
step src_gate 40 $NC -k regex:_gate_fused -c 1 $SRC $MOE
step src_grouped 50 $NC -k regex:_grouped -c 2 $SRC $MOE
step src_mhc 50 $NC -k regex:_mhc_ -c 2 $SRC $MHC
step src_front 40 $NC -k regex:_attention_front -c 1 $SRC $FRONT
for f in "$W"/src_*.log; do gzip "$f"; done
finish
