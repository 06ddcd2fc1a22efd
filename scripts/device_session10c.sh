#!/usr/bin/env bash
# Session 10's second H200 call: the side stream's two sites (kernelbench.decoder.lanes) and moe_routed (the TP
# decoder's MoE: the gate's launch also sorts the slots). The 43-layer Flash step at C = 1 / 16 / 64 first (no site
# with the previous MoE composition, no site, both sites attributed after their timing), then verify of moe_routed,
# the GPU tests (lanes: every site with the side stream equals the same structure on one stream bit for bit, eager and
# graph-replayed; the attention site alone equals no site; the decode-bench GPU tests), no site again, the attention
# site alone, and the op-level bench of moe_routed (triton vs triton_parts); what does not fit the call is skipped.
#   run(command="KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session10c.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-380}
source scripts/device_lib.sh || exit 1
FLASH="--device cuda --impl triton --graph on --layers flash --batches 1,16,64"
step decode_parts 70 $KB decode-bench $FLASH --overlap none --use moe_routed=triton_parts --json "$W/decode_parts.json"
step decode_none 60 $KB decode-bench $FLASH --overlap none --json "$W/decode_none.json"
step decode_all 80 $KB decode-bench $FLASH --overlap all --profile --json "$W/decode_all.json"
step verify 60 $KB verify moe_routed --device cuda --shapes flash-tp8 --examples 3
step gpu_tests 120 python3 -m pytest -q -p no:cacheprovider -o addopts="" -m gpu tests/test_lanes.py \
    tests/test_decode_bench.py
step decode_none_again 50 $KB decode-bench $FLASH --overlap none --json "$W/decode_none_again.json"
step decode_attention 50 $KB decode-bench $FLASH --overlap attention --json "$W/decode_attention.json"
step bench 50 $KB bench moe_routed --impl triton --impl triton_parts --shapes flash-tp8 --batch 1 --batch 16 \
    --batch 64 --max-time 0.05 --json "$W/bench_routed.json"
finish
