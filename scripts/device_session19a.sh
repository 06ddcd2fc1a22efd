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
MOE="$(installed kernels/moe.py)"
cp "$MOE" "$W/moe_gemm.py"
sed 's/^    return {"GATE": "fused" if params\["T"\] <= GATE_FUSE_MAX_T else "gemm"}$/    return {"GATE": "fused" if params["T"] <= GATE_FUSE_MAX_T else "mma"}/' "$MOE" > "$W/moe_mma.py"
diff "$W/moe_gemm.py" "$W/moe_mma.py" | grep -c '^>' > "$W/patch_lines.txt"      # 1: the one default
step gputests 150 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_moe.py -k "mma or capturable"
OPS="$KB bench moe_routed --impl triton --shapes flash-tp8 --batch 16 --batch 64 --max-time 0.5"
step b1 70 $OPS --json "$W/b1.json"
cp "$W/moe_mma.py" "$MOE"
step m1 60 $OPS --json "$W/m1.json"
cp "$W/moe_gemm.py" "$MOE"
step b2 45 $OPS --json "$W/b2.json"
cp "$W/moe_mma.py" "$MOE"
step m2 45 $OPS --json "$W/m2.json"
cp "$W/moe_gemm.py" "$MOE"
DB="$KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 16,64"
step d1 110 $DB --json "$W/d1.json"
cp "$W/moe_mma.py" "$MOE"
step g1 40 $DB --json "$W/g1.json"
cp "$W/moe_gemm.py" "$MOE"
step d2 30 $DB --json "$W/d2.json"
cp "$W/moe_mma.py" "$MOE"
step g2 30 $DB --json "$W/g2.json"
step_times d1 g1 d2 g2
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
step ncu_mma 40 "$NCU" --profile-from-start off --clock-control none -k regex:_gate --section SpeedOfLight --csv \
    python3 scripts/profile_op.py moe_routed --batch 16 --batch 64 --where hash=False
cp "$W/moe_gemm.py" "$MOE"
finish
