#!/usr/bin/env bash
# Session 44: the KV compressor's lane at the default stream priority (stream kind "kv" lowered alone:
# KERNELBENCH_STREAM_PRIORITY=main,lane) against the default (main,lane,kv: raised with the other lanes, as before).
# At C = 1 on the H100 attention_front took 16.2 us beside the KV compressor's step and 8.9 us alone (calls 3 and 6);
# lowered, the compressor's programs are dispatched after the main chain's. The 43-layer step at C = 1 / 16 (the KV
# lane runs up to 16 tokens), whole runs A B A B (the priority is a property of the captured streams, so no --try).
#   run(command="KB_TOTAL_S=200 KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session44c.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-200}
source scripts/device_lib.sh || exit 1
S="--device cuda --impl triton --graph on --layers flash --batches 1,16"
step kv_raised_1 60 $KB decode-bench $S --json "$W/kv_raised_1.json"
step kv_low_1 35 env KERNELBENCH_STREAM_PRIORITY=main,lane $KB decode-bench $S --json "$W/kv_low_1.json"
step kv_raised_2 35 $KB decode-bench $S --json "$W/kv_raised_2.json"
step kv_low_2 35 env KERNELBENCH_STREAM_PRIORITY=main,lane $KB decode-bench $S --json "$W/kv_low_2.json"
step_times kv_raised_1 kv_low_1 kv_raised_2 kv_low_2
finish
