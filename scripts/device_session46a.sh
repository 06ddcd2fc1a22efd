#!/usr/bin/env bash
# Session 46, first call. On an H200: issue 9's table (the copy ceiling, then moe_layer and moe_experts beside the
# triton_kernels peer; carry .gpu_peers), which no session since 39 could measure for want of an H200. On any GPU:
# scripts/device_session45a.sh's settings trials (the fork after the front as a check of the paired form against
# session 45's rotation; the side lanes above the main chain, "lane,kv"; the KV lane alone above it, "kv") and the
# GPU test that captures a settings trial.
#   run(command="KB_TOTAL_S=480 KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session46a.sh",
#       carry=[".whl", ".gpu_peers"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-480}
source scripts/device_lib.sh || exit 1
issue9_table_on_h200
step gpu_try 100 python3 -m pytest -q -m gpu -p no:cacheprovider -rs tests/test_trials.py -k gpu_try
step settings 170 $KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 1,16 --steps 30 \
    --try KERNELBENCH_KV_LANE_FORK=after --try KERNELBENCH_STREAM_PRIORITY=lane,kv --try KERNELBENCH_STREAM_PRIORITY=kv \
    --json "$W/settings.json"
finish
