#!/usr/bin/env bash
# Prepared in session 17 for the next call (not yet run): (1) the GPU lane tests, including the KV lane's bit-equality
# (KERNELBENCH_KV_LANE / Lanes(kv_lane=True): the attention layers' KV compressor step on a stream of its own) and the
# MoE's shared side from 8 tokens; (2) the 43-layer step with the KV lane against without, A B A B, at C = 1, 16, 64;
# (3) kernelbench verify of moe_routed / moe_layer at the new side threshold's token counts (drawn examples); (4)
# Nsight Compute's per-instruction counters of the MoE routing launch at C = 64.
#   run(command="KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session18a.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-500}
source scripts/device_lib.sh || exit 1
step gputests 150 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_lanes.py tests/test_moe.py \
    tests/test_decode_bench.py
DB="$KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 1,16,64"
step a1 110 $DB --json "$W/a1.json"
step k1 30 env KERNELBENCH_KV_LANE=1 $DB --json "$W/k1.json"
step a2 30 $DB --json "$W/a2.json"
step k2 30 env KERNELBENCH_KV_LANE=1 $DB --json "$W/k2.json"
step_times a1 k1 a2 k2
step verify 60 $KB verify moe_routed moe_layer --impl triton --device cuda --shapes flash-tp8 --examples 6
# issue 9 at C = 64: the gate is 21.4 us per layer in the step (bf16 logits GEMM 9.4 + _gate_route_kernel 12.1: top-k
# in 64 programs, then the slot sort in the last one); where its time goes, per source line
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
step ncu_sol 60 "$NCU" --profile-from-start off --clock-control none --section SpeedOfLight --csv \
    python3 scripts/profile_op.py moe_routed moe_layer --batch 64 --where hash=False
step ncu_gate 90 "$NCU" --profile-from-start off --clock-control none -k regex:_gate_route --section SourceCounters \
    --section WarpStateStats --page source --print-source sass --csv python3 scripts/profile_op.py moe_routed \
    --batch 64 --where hash=False
finish
