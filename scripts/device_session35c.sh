#!/usr/bin/env bash
# Session 35, call 4 (H200 so far). Two questions for the next sessions:
# 1. Does PDL at every launch still lose at C = 16 / 64? docs/perf/pdl.md measured +3.5% / +10.6% in session 14, before
#    the side streams, the routing changes and the one-launch kernels of sessions 15-34. KERNELBENCH_PDL auto (the
#    default: one-token launches) against 1 (every launch), A B A B, the 43-layer step.
# 2. Issue 17's fp8_linear at 8 MB weights and 64 tokens (~17% of copy): the op's time at those shapes and Nsight
#    Compute speed of light, occupancy and warp stalls of its launch(es), then source-level stalls at N = 2048, K = 4096.
#   run(command="KB_TOTAL_S=420 KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session35c.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-420}
source scripts/device_lib.sh || exit 1
i=0
for m in auto 1 auto 1; do
    i=$((i + 1))
    export KERNELBENCH_PDL=$m
    step pdl${i}_$m 50 $KB decode-bench --device cuda --impl triton --graph on --layers flash \
        --batches 16,64 --steps 20 --json "$W/pdl${i}_$m.json"
done
unset KERNELBENCH_PDL
step_times pdl1_auto pdl2_1 pdl3_auto pdl4_1
step fp8 60 $KB bench fp8_linear --impl triton --shapes flash-tp8 --where N=2048,4096 --where K=4096,2048 \
    --max-time 0.2 --json "$W/fp8.json"
NCU=$(ncu_path)
SOL="$NCU --profile-from-start off --clock-control none --section SpeedOfLight --section Occupancy
     --section LaunchStats --section WarpStateStats --csv --page details"
step sol_fp8 70 $SOL python3 scripts/profile_op.py fp8_linear --impl triton --shapes flash-tp8 --batch 64 \
    --where N=2048 --where K=4096
python3 scripts/ncu_summary.py "$W/sol_fp8.log" > "$W/sol_fp8_summary.txt" 2>&1
SRC="$NCU --profile-from-start off --clock-control none -k regex:_fp8_linear --launch-count 1 --section SourceCounters
     --section WarpStateStats --page source --print-source sass --csv"
step src_fp8 70 $SRC python3 scripts/profile_op.py fp8_linear --impl triton --shapes flash-tp8 --batch 64 \
    --where N=2048 --where K=4096
python3 scripts/ncu_source.py "$W/src_fp8.log" --top 25 > "$W/src_fp8_summary.txt" 2>&1
gzip -f "$W/src_fp8.log"
finish
