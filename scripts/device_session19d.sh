#!/usr/bin/env bash
# Session 19, call 4: GATE "mma" with its top-k spread over the expert blocks (each block's last split picks its rows'
# top-K candidates; the token block's last program picks from NEB x K of them; hashed: the table's K log scores
# gathered), after call 3 found the old tail (one program walking 16 rows x 256 experts, ~7,400 dependent
# instructions a warp) behind 34 / 39 us. (1) its GPU tests; (2) Nsight Compute durations of the launch at 4 and 8
# warps (GATE_MMA_WARPS) and of the GEMM gate + routing launch it replaces, T = 16, 64; (3) moe_routed's op bench
# with "mma" as the default above 4 tokens at 4 (m) and 8 (n) warps against the committed default (b), interleaved;
# (4) the 43-layer step the same way at C = 16, 64.
#   run(command="KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session19d.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-560}
source scripts/device_lib.sh || exit 1
MMA='s/^    return {"GATE": "fused" if params\["T"\] <= GATE_FUSE_MAX_T else "gemm"}$/    return {"GATE": "fused" if params["T"] <= GATE_FUSE_MAX_T else "mma"}/'
W8='s/_warps_option(cfg, "GATE_MMA_WARPS", 4, "moe_layer")/_warps_option(cfg, "GATE_MMA_WARPS", 8, "moe_layer")/'
variant_of kernels/moe.py moe_gemm moe_mma "$MMA"
variant_of kernels/moe.py moe_gemm moe_mma8 "$MMA;$W8"
step gputests 150 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_moe.py -k "mma or capturable"
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
PROF="python3 scripts/profile_op.py moe_routed --batch 16 --batch 64 --where shared=None"
NSOL="$NCU --profile-from-start off --clock-control none --section SpeedOfLight --csv"
step ncu_gemm 40 $NSOL -k "regex:_gate_route|_bf16_gemm" $PROF
for v in moe_mma moe_mma8; do
    use_variant kernels/moe.py $v; step ncu_$v 40 $NSOL -k regex:_gate_mma $PROF
done
OPS="$KB bench moe_routed --impl triton --shapes flash-tp8 --batch 16 --batch 64 --max-time 0.5"
DB="$KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 16,64"
for r in 1 2; do                     # A B C A B C; the first runs of each kind compile
    use_variant kernels/moe.py moe_gemm; step b$r $(( r == 1 ? 50 : 30 )) $OPS --json "$W/b$r.json"
    use_variant kernels/moe.py moe_mma; step m$r 30 $OPS --json "$W/m$r.json"
    use_variant kernels/moe.py moe_mma8; step n$r 30 $OPS --json "$W/n$r.json"
done
for r in 1 2; do
    use_variant kernels/moe.py moe_gemm; step d$r $(( r == 1 ? 80 : 25 )) $DB --json "$W/d$r.json"
    use_variant kernels/moe.py moe_mma; step g$r 25 $DB --json "$W/g$r.json"
    use_variant kernels/moe.py moe_mma8; step h$r 25 $DB --json "$W/h$r.json"
done
step_times d1 g1 h1 d2 g2 h2
use_variant kernels/moe.py moe_gemm
finish
