#!/usr/bin/env bash
# Session 4, first call: Nsight Compute profiles of the decode step's kernels at Flash TP8 rank shapes, so the
# MoE and latency work starts from counters, not guesses. run(command="bash scripts/device_session4a.sh",
# carry=[".whl", ".gpu_peers"]); results in $OUT/results.tgz.
set -u
TOTAL=${KB_TOTAL_S:-330}
source scripts/device_lib.sh
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
echo "ncu: $NCU" >> "$W/environment.txt"
SECTIONS="--section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats --section WarpStateStats --section SchedulerStats"
prof() {  # prof NAME SECONDS [ncu args --] profile_op args
    local name=$1 secs=$2; shift 2
    step "$name" "$secs" "$NCU" --profile-from-start off --clock-control none $SECTIONS --csv --page details \
        python3 scripts/profile_op.py "$@"
}
step ncu_probe 30 "$NCU" --version
prof moe_c64 60 moe_layer --batch 64 --where hash=False
prof moe_c16 45 moe_layer --batch 16 --where hash=False
prof moe_c1 45 moe_layer --batch 1 --where hash=False
prof peer_c64 45 moe_experts --impl triton_kernels --batch 64
prof rest_c1 60 mhc_post_pre_norm attention_front attention_q sparse_attention indexer_topk fp8_linear grouped_wo_a moe_gate --batch 1 --where M=1 --where ctx=512 --where ragged=False
prof comp_c1 40 compressor_step indexer_q --batch 1 --where ragged=False --where rotate=False
prof rest_c64 60 mhc_post_pre_norm attention_front attention_q sparse_attention fp8_linear grouped_wo_a --batch 64 --where M=64 --where ctx=512 --where ragged=False
step moe_sass_c64 60 "$NCU" --profile-from-start off --clock-control none -k regex:_grouped_gemm --section SourceCounters \
    --section WarpStateStats --import-source no --csv --page source --print-source sass \
    python3 scripts/profile_op.py moe_experts --batch 64
finish
