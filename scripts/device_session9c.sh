#!/usr/bin/env bash
# Session 9's third H200 call (2026-12-02): the GPU MoE tests after the official-layout fix (the default's BDIAG runs
# one group per dot on unprepared weights), the 43-layer Flash step at C = 1 / 16 / 64 with the new MoE default and
# with the previous one (--use moe_experts=triton_v4) in one call, the sweep r5 around the new default, and Nsight
# Compute counters of indexer_topk at C = 64 / 64K tokens (scores vs top-k) and of moe_layer at C = 64.
#   run(command="KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session9c.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-520}
source scripts/device_lib.sh || exit 1
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
echo "ncu: $NCU" >> "$W/environment.txt"
SECTIONS="--section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section SchedulerStats"
prof() {  # prof NAME SECONDS profile_op args
    local name=$1 secs=$2; shift 2
    step "$name" "$secs" "$NCU" --profile-from-start off --clock-control none $SECTIONS --csv --page details \
        python3 scripts/profile_op.py "$@"
}
step gpu_tests 45 python3 -m pytest -q -p no:cacheprovider -o addopts="" -m gpu tests/test_moe.py
step decode_new 110 $KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 1,16,64 \
    --json "$W/decode_new.json"
step decode_v4 110 $KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 1,16,64 \
    --use moe_experts=triton_v4 --json "$W/decode_v4.json"
step moe_sweep 110 python3 scripts/moe_sweep.py --sweep r5 --baselines triton_v4 --warm 15 --max-time 0.06 \
    --cases moe_layer:64 moe_layer:16 moe_layer:1 moe_experts:64 --json "$W/moe_sweep.json"
prof ncu_index_c64 60 indexer_topk --shapes flash-tp8-long --batch 64 --context 65536 --where ragged=False
prof ncu_moe_c64 60 moe_layer --batch 64 --where hash=False
finish
