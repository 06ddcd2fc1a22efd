#!/usr/bin/env bash
# Session 19, call 5 (last of the session): (1) every GPU test of tests/test_moe.py (the refactored top-k helpers run
# in the default gate kernels too); (2) kernelbench verify of the gate ops on the H200 (their config spaces include
# GATE "mma"); (3) Nsight Compute durations of GATE "mma" with its partial sums loaded 4 at a time
# (GATE_MMA_SUM_LOADS) beside the GEMM gate + routing launch, T = 16, 64; (4) the 43-layer step with "mma" as the
# default above 4 tokens (g) against the committed default (d), A B A B.
#   run(command="KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session19e.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-440}
source scripts/device_lib.sh || exit 1
variant_of kernels/moe.py moe_gemm moe_mma \
    's/^    return {"GATE": "fused" if params\["T"\] <= GATE_FUSE_MAX_T else "gemm"}$/    return {"GATE": "fused" if params["T"] <= GATE_FUSE_MAX_T else "mma"}/'
step gputests 90 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_moe.py
step verify 100 $KB verify moe_gate moe_routed moe_layer --impl triton --device cuda --shapes flash-tp8 --examples 3 \
    --time-budget 8
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
PROF="python3 scripts/profile_op.py moe_routed --batch 16 --batch 64 --where shared=None"
NSOL="$NCU --profile-from-start off --clock-control none --section SpeedOfLight --csv"
step ncu_gemm 35 $NSOL -k "regex:_gate_route|_bf16_gemm" $PROF
use_variant kernels/moe.py moe_mma; step ncu_mma 35 $NSOL -k regex:_gate_mma $PROF
DB="$KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 16,64"
for r in 1 2; do
    use_variant kernels/moe.py moe_gemm; step d$r $(( r == 1 ? 70 : 25 )) $DB --json "$W/d$r.json"
    use_variant kernels/moe.py moe_mma; step g$r 25 $DB --json "$W/g$r.json"
done
step_times d1 g1 d2 g2
use_variant kernels/moe.py moe_gemm
finish
