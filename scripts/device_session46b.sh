#!/usr/bin/env bash
# Session 46, after calls 1-2 (data/h100-2026-12-06-session46): at one token the side lanes above the main chain
# ("lane,kv") made the step 0.027 / 0.031 ms faster, from 16 tokens 0.16 slower, so the default is now
# "main:2,lane,kv" (the capture stream raised from two tokens; kernels/common.py). Here: the GPU test of the streams'
# priorities; the old default ("main,lane,kv" at every C) as a trial against the new one at C = 1 (where they differ;
# expect "slower"), and the main chain lowered up to 15 tokens ("main:16,lane,kv") at C = 2 / 4 / 8, where the new
# default raises it unmeasured. On an H200 first: issue 9's table beside the triton_kernels peer (carry .gpu_peers)
# and the step as shipped with its attribution.
#   run(command="KB_TOTAL_S=480 KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session46b.sh",
#       carry=[".whl", ".gpu_peers"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-480}
source scripts/device_lib.sh || exit 1
issue9_table_on_h200
step gpu_prio 60 python3 -m pytest -q -m gpu -p no:cacheprovider -rs tests/test_lanes.py -k priority
step prio 120 $KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 1,2,4,8 --steps 30 \
    --try KERNELBENCH_STREAM_PRIORITY=main,lane,kv --try KERNELBENCH_STREAM_PRIORITY=main:16,lane,kv \
    --json "$W/prio.json"
step step_attr 120 $KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 1,16,64 --profile \
    --json "$W/step_attr.json"
finish
