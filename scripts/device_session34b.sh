#!/usr/bin/env bash
# Written in session 33 for the next lent card (issue 9 on the H200: moe_layer at 33.5 / 53.8% of copy at C = 1 / 64,
# targets 40 / 60; on session 33's H100 the same kernels reach 43.5 / 65.6%, and they ran only 9-16% faster on the
# H200's 41% more bandwidth). Where the MoE launches spend their time on the card that comes: Nsight Compute speed of
# light, occupancy and warp stalls of every moe_layer launch at C = 1 and 64 (score routing), and source-level stalls
# of the W1/W3 launch at C = 64.
#   run(command="KB_TOTAL_S=300 KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session34b.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-300}
source scripts/device_lib.sh || exit 1
NCU=$(ncu_path)
SOL="$NCU --profile-from-start off --clock-control none --section SpeedOfLight --section Occupancy
     --section LaunchStats --section WarpStateStats --csv --page details"
for b in 1 64; do
    step sol_t$b 70 $SOL python3 scripts/profile_op.py moe_layer --impl triton --shapes flash-tp8 --batch $b \
        --where hash=False
    python3 scripts/ncu_summary.py "$W/sol_t$b.log" > "$W/sol_t${b}_summary.txt" 2>&1
done
SRC="$NCU --profile-from-start off --clock-control none -k regex:_grouped_gemm --launch-count 1 --section SourceCounters
     --section WarpStateStats --page source --print-source sass --csv"
step src_up64 90 $SRC python3 scripts/profile_op.py moe_layer --impl triton --shapes flash-tp8 --batch 64 \
    --where hash=False
python3 scripts/ncu_source.py "$W/src_up64.log" --top 25 > "$W/src_up64_summary.txt" 2>&1
gzip -f "$W/src_up64.log"
finish
