#!/usr/bin/env bash
# Session 44 (built after its device time): at C = 1 on the H100 attention_front took 16.2 us beside the KV
# compressor's step and 8.9 us alone (data/h100-2026-12-06-session44, calls 3 and 6). Two ways to keep the KV lane out
# of its way, each against the default, in rotation (whole 43-layer step runs at C = 1 / 16, where the KV lane runs;
# both are properties of the captured streams, so no --try):
#   kv_low:  KERNELBENCH_STREAM_PRIORITY=main,lane (stream kind "kv" at the default priority: dispatched after main);
#   after:   KERNELBENCH_KV_LANE_FORK=after (the KV lane forks once the attention front is queued);
#   both:    the two together (added in session 45);
# and (session 45) at C = 1 with --try: attention_front at SPLIT 16 (384 programs instead of 768) and the compressor
# steps at one program a SM ("waves" 1), each fewer programs competing for the SMs beside the other.
# First the lanes' GPU bit test (the fork after the front changes no bit, eager and graph-replayed).
#   run(command="KB_TOTAL_S=300 KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session44c.sh", carry=[".whl"])
# (on an H200 also issue 9's table: KB_TOTAL_S=520, carry=[".whl", ".gpu_peers"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-300}
source scripts/device_lib.sh || exit 1
S="--device cuda --impl triton --graph on --layers flash --batches 1,16"
step lanes_bits 60 python3 -m pytest -q -m gpu -p no:cacheprovider -rs tests/test_lanes.py -k side_stream_changes_no_bit
for r in 1 2; do
    step "default_$r" 45 $KB decode-bench $S --json "$W/default_$r.json"
    step "kv_low_$r" 35 env KERNELBENCH_STREAM_PRIORITY=main,lane $KB decode-bench $S --json "$W/kv_low_$r.json"
    step "after_$r" 35 env KERNELBENCH_KV_LANE_FORK=after $KB decode-bench $S --json "$W/after_$r.json"
    step "both_$r" 35 env KERNELBENCH_STREAM_PRIORITY=main,lane KERNELBENCH_KV_LANE_FORK=after $KB decode-bench $S \
        --json "$W/both_$r.json"
    if [ "$r" = 1 ]; then   # session 45: fewer programs beside each other at C = 1 (30 interleaved pairs, A/A first)
        step try_grid 90 $KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 1 --steps 30 \
            --try 'attention_front@M=1={"SPLIT": 16}' --try 'compressor_step@T=1={"waves": 1}' --json "$W/try_grid.json"
    fi
done
step_times default_1 kv_low_1 after_1 both_1 default_2 kv_low_2 after_2 both_2
# on an H200 (session 45): issue 9's table beside the triton_kernels peer and the copy ceiling (carry .gpu_peers)
if grep -q "H200" "$W/environment.txt"; then
    step copy 30 $KB calibrate --measure copy_gbps
    step issue9 150 $KB bench moe_layer moe_experts --impl triton --impl triton_kernels --shapes flash-tp8 \
        --max-time 0.3 --json "$W/issue9.json"
fi
finish
