#!/usr/bin/env bash
# Session 10's second H200 call: the side stream's two sites (kernelbench.decoder.lanes) and moe_routed (the TP
# decoder's MoE: the gate's launch also sorts the slots). GPU tests (lanes: every site with the side stream equals the
# same structure on one stream bit for bit, eager and graph-replayed; the attention site alone equals no site; the
# decode-bench GPU tests), verify and op-level bench of moe_routed (triton vs triton_parts, the previous
# composition), then the 43-layer Flash step at C = 1 / 16 / 64: no site with the previous MoE composition, no site,
# the attention site, both sites (attributed after its timing), no site again, in one call.
#   run(command="KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session10c.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-420}
source scripts/device_lib.sh || exit 1
step gpu_tests 150 python3 -m pytest -q -p no:cacheprovider -o addopts="" -m gpu tests/test_lanes.py \
    tests/test_decode_bench.py
step verify 60 $KB verify moe_routed --device cuda --shapes flash-tp8 --examples 3
step bench 60 $KB bench moe_routed --impl triton --impl triton_parts --shapes flash-tp8 --batch 1 --batch 16 \
    --batch 64 --max-time 0.05 --json "$W/bench_routed.json"
FLASH="--device cuda --impl triton --graph on --layers flash --batches 1,16,64"
step decode_parts 70 $KB decode-bench $FLASH --overlap none --use moe_routed=triton_parts --json "$W/decode_parts.json"
for s in none attention all none; do
    extra=""; [ "$s" = all ] && extra="--profile"
    n=decode_$s; [ -e "$W/$n.json" ] && n=${n}_again
    step $n 80 $KB decode-bench $FLASH --overlap $s $extra --json "$W/$n.json"
done
finish
