#!/usr/bin/env bash
# Session 34, call 3 (issue 9: the gate on the MoE's critical path; calls 1-2 ran on an H100). moe_gate and moe_layer at
# C = 1 beside two gate configs (scripts/gate_variants.py: GATE_WARPS 8; GATE_ROWS "routed", whose step trial in call 1
# was within noise) on the same inputs; then Nsight Compute's per-instruction stalls of the one-launch gate at C = 1
# and of the gate GEMM + routing launch at C = 64 (score routing): where the gate's ~6.5 / ~16 us go.
#   run(command="KB_TOTAL_S=260 KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session34c.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-260}
source scripts/device_lib.sh || exit 1
step gate_c1 120 $KB bench moe_gate moe_layer --module scripts/gate_variants.py --impl triton --impl triton_gw8 \
    --impl triton_rows --shapes flash-tp8 --batch 1 --max-time 0.5
NCU=$(ncu_path)
SRC="$NCU --profile-from-start off --clock-control none --section SourceCounters --section WarpStateStats
     --section SpeedOfLight --page source --print-source sass --csv"
step src_gate1 45 $SRC -k regex:_gate_fused --launch-count 1 python3 scripts/profile_op.py moe_layer --impl triton \
    --shapes flash-tp8 --batch 1 --where hash=False
python3 scripts/ncu_source.py "$W/src_gate1.log" --top 30 > "$W/src_gate1_summary.txt" 2>&1
step src_gate64 60 $SRC -k regex:"_gate_route|_bf16_gemm" --launch-count 2 python3 scripts/profile_op.py moe_layer \
    --impl triton --shapes flash-tp8 --batch 64 --where hash=False
python3 scripts/ncu_source.py "$W/src_gate64.log" --top 30 > "$W/src_gate64_summary.txt" 2>&1
gzip -f "$W"/src_gate*.log
finish
