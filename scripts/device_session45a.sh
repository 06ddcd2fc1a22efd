#!/usr/bin/env bash
# Session 45, after call 1 (data/h100-2026-12-06-session45): lowering the KV lane's priority made the step at C = 1
# 0.13 ms slower, so the other direction: the main chain at the default priority and the side lanes above it
# ("lane,kv"), or the KV lane alone above everything ("kv"), against the default (all three kinds high).
# The results are packed after every step, so a call cut short still brings back the steps it finished.
#   run(command="KB_TOTAL_S=300 KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session45a.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-300}
source scripts/device_lib.sh || exit 1
# Since this script was first written, --try takes those settings (kernelbench/decoder/trials.py STEP_SETTINGS): one
# decode-bench, 30 interleaved pairs per trial after the A/A control. The fork after the front again, as a check of
# the paired form against call 1's rotation (0.14 ms slower at C = 1 there), then the two new priorities; then the GPU
# test that captures a settings trial.
step settings 170 $KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 1,16 --steps 30 \
    --try KERNELBENCH_KV_LANE_FORK=after --try KERNELBENCH_STREAM_PRIORITY=lane,kv --try KERNELBENCH_STREAM_PRIORITY=kv \
    --json "$W/settings.json"
step gpu_try 120 python3 -m pytest -q -m gpu -p no:cacheprovider -rs tests/test_trials.py -k gpu_try
finish
