#!/usr/bin/env bash
# Session 51's first call (written in session 50). On an H200 (issue 9's card; none since session 46): issue 9's
# "done when" verify, the copy ceiling and issue 9's table beside the triton_kernels peer (carry .gpu_peers). On any
# card: where the step loses time with GATE_TAIL "up" (session 50, H100: moe_layer alone 30.9 -> 29.2 us, yet the
# step at C = 1 0.06-0.19 ms slower in every form): the step's per-kernel attribution at C = 1 without and with
# "up" pinned for moe_routed (KERNELBENCH_PIN_CONFIG merges over the default), then the one-token timeline of "up"
# in moe_routed (the step's form) and moe_layer, with room to finish (it hit 30 s in session 50); the GPU test of
# the traced moe_routed call first (tests/test_trace.py, new in session 50). Before those: config GATE_TOPK_ROWS 1
# (new in session 50): its GPU bit test, the step at C = 1 with it (paired), moe_layer / moe_routed with it.
#   run(command="KB_TOTAL_S=540 KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session51a.sh", carry=[".whl", ".gpu_peers"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-540}
source scripts/device_lib.sh || exit 1
UP='{"GATE_TAIL": "up"}'
if grep -q "H200" "$W/environment.txt"; then
    step verify 150 $KB verify moe_gate moe_experts shared_expert moe_layer --impl triton --device cuda \
        --shapes flash-tp8 --examples 3
fi
issue9_table_on_h200
step gpu_new 120 python3 -m pytest -q -m gpu -p no:cacheprovider -rs tests/test_trace.py tests/test_moe.py \
    -k "traced or one_row"
# config GATE_TOPK_ROWS 1 (session 50, untimed): the gate's one-token top-k on one row instead of a padded two
ROW1='{"GATE_TOPK_ROWS": 1}'
step step_row1 60 $KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 1 --steps 30 \
    --try "moe_routed@T=1=$ROW1" --json "$W/step_row1.json"
step bench_row1 50 $KB bench moe_layer moe_routed --impl triton --shapes flash-tp8 --where T=1 --max-time 0.3 \
    --try "moe_layer@T=1=$ROW1" --try "moe_routed@T=1=$ROW1" --json "$W/bench_row1.json"
step kernels_last 70 $KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 1 --profile \
    --kernels --json "$W/kernels_last.json"
step kernels_up 70 env KERNELBENCH_PIN_CONFIG="moe_routed=$UP" $KB decode-bench --device cuda --impl triton --graph on \
    --layers flash --batches 1 --profile --kernels --json "$W/kernels_up.json"
# the step's form (moe_routed, the TP8 slice of the shared expert: "up" was slower there even alone), then moe_layer
step timeline_routed 60 python3 scripts/moe_timeline.py --device cuda --op moe_routed --tokens 1 --replays 10 \
    --pin "$UP" --json "$W/timeline_routed.json"
step timeline_layer 60 python3 scripts/moe_timeline.py --device cuda --tokens 1 --replays 10 --pin "$UP" \
    --json "$W/timeline_layer.json"
finish
