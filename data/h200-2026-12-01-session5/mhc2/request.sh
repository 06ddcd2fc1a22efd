#!/usr/bin/env bash
# helper mhc2 (issue 17 item 4): mHC impl triton_v4 (`_mhc_proj4` + `_mhc_fin4`) against the current `triton`,
# config variants, then Nsight Compute (SOL, warp states, per-SASS stall samples) of triton_v4 at T=1 and T=64.
# Runs from the mhc2 worktree root; writes $OUT/mhc2/. Most important first (killed at 75 s).
O=$OUT/mhc2; mkdir -p $O
T0=$(date +%s)
left() { local l=$(( $1 - ($(date +%s) - T0) )); echo $(( l > 1 ? l : 1 )); }
# 1. T=1: current vs new + variants (iters1 is a diagnostic: its comb recheck must fail)
timeout $(left 24) python3 -m kernelbench bench mhc_post_pre_norm --shapes flash-tp8 --batch 1 --max-time 0.1 --max-sets 32 \
  --module scripts/mhc_variants.py --impl triton --impl triton_v4 --impl v4_p1x16 --impl v4_nw16 --impl v4_nw4 --impl diag_v4_iters1 \
  --json $O/bench_c1.json > $O/bench_c1.log 2>&1
echo "t=$(( $(date +%s) - T0 ))s c1" >> $O/times.txt
# 2. T=64
timeout $(left 46) python3 -m kernelbench bench mhc_post_pre_norm --shapes flash-tp8 --batch 64 --max-time 0.1 --max-sets 32 \
  --module scripts/mhc_variants.py --impl triton --impl triton_v4 --impl v4_noreload --impl v4_simt8 --impl v4_simt16 --impl v4_nw16 --impl v4_mma16w8 --impl v4_simt4 \
  --json $O/bench_c64.json > $O/bench_c64.log 2>&1
echo "t=$(( $(date +%s) - T0 ))s c64" >> $O/times.txt
# 3. ncu of triton_v4 (default configs) at T=1 and 64, one profiling run with source counters, then read back
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
timeout $(left 68) "$NCU" --profile-from-start off --clock-control none -o $O/v4 --section SpeedOfLight \
  --section WarpStateStats --section LaunchStats --section SourceCounters \
  python3 scripts/profile_op.py mhc_post_pre_norm --impl triton_v4 --batch 1 --batch 64 > $O/ncu_run.log 2>&1
echo "t=$(( $(date +%s) - T0 ))s ncu" >> $O/times.txt
if [ -f $O/v4.ncu-rep ]; then
  "$NCU" --import $O/v4.ncu-rep --csv --page details > $O/ncu_details.csv 2>&1
  python3 scripts/ncu_summary.py $O/ncu_details.csv > $O/ncu_summary.txt 2>&1
  "$NCU" --import $O/v4.ncu-rep --csv --page source --print-source sass > $O/ncu_source.csv 2>&1
  gzip -f $O/ncu_source.csv; rm -f $O/v4.ncu-rep
fi
echo "t=$(( $(date +%s) - T0 ))s import" >> $O/times.txt
# 4. T=16, then the unfused ops, current vs new (what time is left)
timeout $(left 72) python3 -m kernelbench bench mhc_post_pre_norm --shapes flash-tp8 --batch 16 --max-time 0.1 --max-sets 32 \
  --impl triton --impl triton_v4 --json $O/bench_c16.json > $O/bench_c16.log 2>&1
timeout $(left 75) python3 -m kernelbench bench mhc_pre mhc_post_pre --shapes flash-tp8 --batch 1 --batch 64 --max-time 0.1 \
  --max-sets 32 --impl triton --impl triton_v4 --json $O/bench_other.json > $O/bench_other.log 2>&1
echo "t=$(( $(date +%s) - T0 ))s end" >> $O/times.txt
