#!/usr/bin/env bash
# Prepared in session 18 for the next call (not yet run): GATE "mma" (kernels/moe.py _gate_mma_kernel: the whole
# gate in one launch, tensor-core logits split over D, the top-k by token block, the slot sort), opt-in so far.
# (1) its GPU test (bf16 MMA compiled, against the GEMM gate, graph replay, moe_routed against the reference);
# (2) moe_routed's op bench at C = 16, 64 with "mma" as the default above 4 tokens (gate_default patched in the
# installed copy, "m") against the code as committed ("b": the GEMM gate + routing launch), interleaved; (3) the
# 43-layer step the same way, A B A B; (4) the mma launch alone under Nsight Compute (call 4 of session 18 has the
# routing launch's 7.8 / 10.3 us at T = 16 / 64, and call 1 the gate GEMM's 6.9 us at 64).
#   run(command="KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session19a.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-560}
source scripts/device_lib.sh || exit 1
variant_of kernels/moe.py moe_gemm moe_mma \
    's/^    return {"GATE": "fused" if params\["T"\] <= GATE_FUSE_MAX_T else "gemm"}$/    return {"GATE": "fused" if params["T"] <= GATE_FUSE_MAX_T else "mma"}/'
step gputests 200 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_moe.py -k "mma or capturable"
OPS="$KB bench moe_routed --impl triton --shapes flash-tp8 --batch 16 --batch 64 --max-time 0.5"
DB="$KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 16,64"
for r in 1 2; do                     # A B A B; the first runs of each kind compile
    use_variant kernels/moe.py moe_gemm; step b$r $(( r == 1 ? 70 : 45 )) $OPS --json "$W/b$r.json"
    use_variant kernels/moe.py moe_mma; step m$r $(( r == 1 ? 60 : 45 )) $OPS --json "$W/m$r.json"
done
for r in 1 2; do
    use_variant kernels/moe.py moe_gemm; step d$r $(( r == 1 ? 110 : 30 )) $DB --json "$W/d$r.json"
    use_variant kernels/moe.py moe_mma; step g$r $(( r == 1 ? 40 : 30 )) $DB --json "$W/g$r.json"
done
step_times d1 g1 d2 g2
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
step ncu_mma 40 "$NCU" --profile-from-start off --clock-control none -k regex:_gate --section SpeedOfLight --csv \
    python3 scripts/profile_op.py moe_routed --batch 16 --batch 64 --where hash=False
use_variant kernels/moe.py moe_gemm
finish
