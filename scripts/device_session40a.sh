#!/usr/bin/env bash
# Session 40, call 1. (1) Session 39's unrun tuning (scripts/device_session39d.sh): the step's untuned keys at 16 / 64
# tokens (the shared slice's fp8_linear, the indexer's weights_proj), verified, tuned, judged in the 43-layer step.
# (2) Where moe_layer's 161 us at 64 tokens go on the H200 (issue 9: 53.2% of copy against 60%): Nsight Compute speed
# of light of every launch at T = 64 (score routing), and source-level stalls of the routing launch (_gate_route_kernel:
# 11.8 us alone on session 34's H100, 1.6% of DRAM).
#   run(command="KB_TOTAL_S=420 KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session40a.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-420}
source scripts/device_lib.sh || exit 1
NCU=$(ncu_path)
SOL="$NCU --profile-from-start off --clock-control none --section SpeedOfLight --section Occupancy
     --section LaunchStats --section WarpStateStats --csv --page details"
step sol_t64 70 $SOL python3 scripts/profile_op.py moe_layer --impl triton --shapes flash-tp8 --batch 64 \
    --where hash=False
python3 scripts/ncu_summary.py "$W/sol_t64.log" > "$W/sol_t64_summary.txt" 2>&1
SRC="$NCU --profile-from-start off --clock-control none -k regex:_gate_route --launch-count 1 --section SourceCounters
     --section WarpStateStats --page source --print-source sass --csv"
step src_route64 60 $SRC python3 scripts/profile_op.py moe_layer --impl triton --shapes flash-tp8 --batch 64 \
    --where hash=False
python3 scripts/ncu_source.py "$W/src_route64.log" --top 30 > "$W/src_route64_summary.txt" 2>&1
gzip -f "$W/src_route64.log"
V="--impl triton --device cuda --shapes flash-tp8 --examples 1 --time-budget 3"
T="--impl triton --shapes flash-tp8 --max-trials 16 --export $W/tuned.json"
step verify_lin 45 $KB verify fp8_linear $V --where M=16,64 --where K=256,4096
step verify_bf16 25 $KB verify bf16_linear $V --where M=16,64 --where K=4096
step tune_lin1 25 $KB tune fp8_linear $T --where M=16 --where N=256 --where K=4096 --budget 20
step tune_lin2 35 $KB tune fp8_linear $T --where M=16,64 --where N=4096 --where K=256 --budget 30
step tune_bf16 30 $KB tune bf16_linear $T --where M=16,64 --where N=64 --where K=4096 --budget 25
entries=()
if [ -s "$W/tuned.json" ]; then entries=(--try-entries "$W/tuned.json" --keep-faster "$W/keep.json"); fi
step trial_step 95 $KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 16,64 --steps 30 \
    "${entries[@]}" --json "$W/trial_step.json"
finish
