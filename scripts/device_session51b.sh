#!/usr/bin/env bash
# Session 51's second call. GATE_TOPK_ROWS 1 is the default now (call 1, H100: the step at C = 1 0.016 ms faster):
# its GPU tests, then `verify` of the three ops whose one-token default changed; the step as shipped at C = 1 / 16 /
# 64; the one-token timeline of moe_routed (the step's form) with the gate tail's new sub-step marks (1 scores
# loaded, 2 top-k places, 3 weights / ids stored, 4 routing lists stored: where its ~4 us go); the C = 1 step on one
# stream without PDL, per kernel (issue 17's per-op times, last taken in session 44). On an H200: issue 9's table
# beside the peer and its "done when" verify.
#   run(command="KB_TOTAL_S=480 KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session51b.sh", carry=[".whl", ".gpu_peers"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-480}
source scripts/device_lib.sh || exit 1
step gpu_gate 90 python3 -m pytest -q -m gpu -p no:cacheprovider -rs tests/test_trace.py tests/test_moe.py \
    -k "traced or one_row or gate"
step verify 120 $KB verify moe_gate moe_layer moe_routed --impl triton --device cuda --shapes flash-tp8 --examples 2
step timeline_routed 45 python3 scripts/moe_timeline.py --device cuda --op moe_routed --tokens 1 --replays 10 \
    --json "$W/timeline_routed.json"
step step 60 $KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 1,16,64 \
    --json "$W/step.json"
step_times step
step kernels_nopdl 50 env KERNELBENCH_PDL=0 $KB decode-bench --device cuda --impl triton --graph on --layers flash \
    --batches 1 --overlap none --profile --kernels --json "$W/kernels_nopdl.json"
if grep -q "H200" "$W/environment.txt"; then
    issue9_table_on_h200
    step verify9 150 $KB verify moe_gate moe_experts shared_expert moe_layer --impl triton --device cuda \
        --shapes flash-tp8 --examples 3
fi
finish
