#!/usr/bin/env bash
# Session 45, after call 1 (data/h100-2026-12-06-session45): lowering the KV lane's priority made the step at C = 1
# 0.13 ms slower, so the other direction: the main chain at the default priority and the side lanes above it
# ("lane,kv"), or the KV lane alone above everything ("kv"), against the default (all three kinds high), in rotation
# (whole decode-bench runs at C = 1; the priority is a property of the captured streams, so no --try). The results are
# packed after every step, so a call cut short still brings back the runs it finished.
#   run(command="KB_TOTAL_S=200 KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session45a.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-200}
source scripts/device_lib.sh || exit 1
S="--device cuda --impl triton --graph on --layers flash --batches 1"
for r in 1 2; do
    step "default_$r" 45 $KB decode-bench $S --json "$W/default_$r.json"
    step "sides_high_$r" 30 env KERNELBENCH_STREAM_PRIORITY=lane,kv $KB decode-bench $S --json "$W/sides_high_$r.json"
    step "kv_high_$r" 30 env KERNELBENCH_STREAM_PRIORITY=kv $KB decode-bench $S --json "$W/kv_high_$r.json"
done
step_times default_1 sides_high_1 kv_high_1 default_2 sides_high_2 kv_high_2
finish
