#!/usr/bin/env bash
# Session 10's third H200 call: the side stream's two sites (kernelbench.decoder.lanes). GPU tests of the lanes (every
# site with the side stream equals the same structure on one stream bit for bit, eager and graph-replayed; the
# attention site alone equals no site), then the 43-layer Flash step at C = 1 / 16 / 64 with no site, the attention
# site, and both sites (attributed after its timing), and no site again, in one call.
#   run(command="KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session10c.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-400}
source scripts/device_lib.sh || exit 1
step gpu_tests 150 python3 -m pytest -q -p no:cacheprovider -o addopts="" -m gpu tests/test_lanes.py \
    tests/test_decode_bench.py
for s in none attention all none; do
    extra=""; [ "$s" = all ] && extra="--profile"
    n=decode_$s; [ -e "$W/$n.json" ] && n=${n}_again
    step $n 100 $KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 1,16,64 \
        --overlap $s $extra --json "$W/$n.json"
done
finish
