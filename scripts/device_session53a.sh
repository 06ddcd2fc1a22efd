#!/usr/bin/env bash
# Session 53's first call (written in session 52, when no H200 came). On an H200 first (the card issues 9 and 17
# name; none since session 46): the copy ceiling and issue 9's table beside the triton_kernels peer (carry
# .gpu_peers). Then, on any card: config COMBINE_TICKETS "live" (built in session 52, untimed: in the W2 launch only
# the working items' programs take the combine ticket; session 52's timeline had the combine wait 2.5 us for 1,280
# idle programs to be scheduled): its GPU bit test, its step trial at C = 1 and the one-token moe_routed timeline
# with it; then issue 9's "done when" verify (H200 only) and the step at 1 / 16 / 64 with attribution.
#   run(command="KB_TOTAL_S=580 KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session53a.sh", carry=[".whl", ".gpu_peers"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-580}
source scripts/device_lib.sh || exit 1
issue9_table_on_h200
# limits for a cold machine (session 51's call 2 lost its GPU tests, verify and step to 90 / 120 / 60 s limits)
step gpu_live 150 python3 -m pytest -q -m gpu -p no:cacheprovider -rs tests/test_moe.py tests/test_trace.py \
    -k "combine_ticket or traced"
step step_live 120 $KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 1 --steps 30 \
    --try 'moe_routed@T=1={"COMBINE_TICKETS": "live"}' --json "$W/step_live.json"
step timeline_live 80 python3 scripts/moe_timeline.py --device cuda --op moe_routed --tokens 1 --replays 10 \
    --pin '{"COMBINE_TICKETS": "live"}' --json "$W/timeline_live.json"
issue9_verify_on_h200
step_attributed
finish
