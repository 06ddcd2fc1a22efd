#!/usr/bin/env bash
# Session 10's H200 call: the decode step's side stream (kernelbench.decoder.lanes). GPU tests of the lanes (the step
# with the side stream equals the one-stream step bit for bit, eager and graph-replayed, C = 1 / 16 / 64) and of the
# attribution with kernels side by side; then the 43-layer Flash step at C = 1 / 16 / 64 on one stream and with the
# side stream, in one call, and the attribution of the side-stream step (after all its timing).
#   run(command="KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session10b.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-520}
source scripts/device_lib.sh || exit 1
step gpu_tests 120 python3 -m pytest -q -p no:cacheprovider -o addopts="" -m gpu tests/test_lanes.py \
    tests/test_decode_bench.py
step decode_one 110 $KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 1,16,64 \
    --overlap none --json "$W/decode_one.json"
step decode_two 170 $KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 1,16,64 \
    --profile --json "$W/decode_two.json"
step decode_one_again 110 $KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 1,16,64 \
    --overlap none --json "$W/decode_one_again.json"
finish
