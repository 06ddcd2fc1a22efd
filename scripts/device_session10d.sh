#!/usr/bin/env bash
# Session 10's third H200 call: verify of moe_routed with its rms-scaled floor, the lanes' GPU tests (the shared
# expert's site at every C: bit for bit with and without the side stream, eager and graph-replayed; the attention site
# alone equals no site), and the 43-layer Flash step at C = 1 / 16 / 64 with the default sites (the shared expert's
# from 16 tokens; attributed after its timing) and with none.
#   run(command="KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session10d.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-330}
source scripts/device_lib.sh || exit 1
FLASH="--device cuda --impl triton --graph on --layers flash --batches 1,16,64"
step verify 150 $KB verify moe_routed --device cuda --shapes flash-tp8 --examples 3 --impl triton
step gpu_tests 100 python3 -m pytest -q -p no:cacheprovider -o addopts="" -m gpu tests/test_lanes.py
step decode_default 60 $KB decode-bench $FLASH --profile --json "$W/decode_default.json"
step decode_none 45 $KB decode-bench $FLASH --overlap none --json "$W/decode_none.json"
finish
