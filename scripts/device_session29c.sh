#!/usr/bin/env bash
# Session 29, call 3: where csa_indices' one-program top-k spends its time at 64K tokens now that it is the default at
# every C there (session 29 call 1): Nsight Compute source counters and stall reasons of `_index_topk` (and the score
# launch's speed of light) at T = 1 and T = 64; the 43-layer step at 64K with per-op attribution (C = 1, 16, 64).
#   run(command="KB_TOTAL_S=300 KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session29c.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-300}
source scripts/device_lib.sh || exit 1
NCU=$(ncu_path)
SRC="$NCU --profile-from-start off --clock-control none -k regex:_index_ --section SpeedOfLight --section SourceCounters
     --section WarpStateStats --page source --print-source sass --csv"
for b in 1 64; do
    step src_t$b 60 $SRC python3 scripts/profile_op.py csa_indices --shapes flash-tp8-long --batch $b --context 65536 \
        --where ragged=False
    python3 scripts/ncu_source.py "$W/src_t$b.log" --top 20 > "$W/src_t${b}_summary.txt" 2>&1
    gzip -f "$W/src_t$b.log"
done
SOL="$NCU --profile-from-start off --clock-control none -k regex:_index_ --section SpeedOfLight --csv --page details"
step sol 60 $SOL python3 scripts/profile_op.py csa_indices --shapes flash-tp8-long --batch 1 --batch 16 --batch 64 \
    --context 65536 --where ragged=False
python3 scripts/ncu_summary.py "$W/sol.log" > "$W/sol_summary.txt" 2>&1
step step64k 120 $KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 1,16,64 \
    --context 65536 --kernels --json "$W/step64k.json"
step_times step64k
finish
