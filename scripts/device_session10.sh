#!/usr/bin/env bash
# Session 10's first H200 call (2026-12-02): the baseline of this session. The 43-layer Flash step at C = 1 / 16 / 64
# with the per-op attribution (after all timing), and Nsight Compute counters of the MoE layer at C = 1 / 16 and of
# the step's largest non-MoE ops at C = 1 / 64 (mhc_post_pre_norm, attention_front, indexer_q, compressor_step).
#   run(command="KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session10.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-400}
source scripts/device_lib.sh || exit 1
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
echo "ncu: $NCU" >> "$W/environment.txt"
SECTIONS="--section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section SchedulerStats"
prof() {  # prof NAME SECONDS profile_op args
    local name=$1 secs=$2; shift 2
    step "$name" "$secs" "$NCU" --profile-from-start off --clock-control none $SECTIONS --csv --page details \
        python3 scripts/profile_op.py "$@"
}
step decode 150 $KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 1,16,64 --profile \
    --json "$W/decode_flash.json"
prof ncu_moe 70 moe_layer --batch 1 --batch 16 --where hash=False
prof ncu_rest 100 mhc_post_pre_norm attention_front indexer_q compressor_step attention_q moe_gate --batch 1 --batch 64
python3 scripts/ncu_summary.py "$W/ncu_moe.log" "$W/ncu_rest.log" > "$W/ncu_summary.txt" 2>&1
finish
