#!/usr/bin/env bash
# Session 34, call 6 (tree 24d3dc1; PREFETCH_EXPERTS and the triton_pfN variants were removed after it: measured
# slower, docs/perf/h100-2026-12-05-session34.md): config PREFETCH_EXPERTS (kernels/moe.py: local experts 0 .. n-1's W1 / W3 bulk-prefetched into
# L2 from a side stream while the gate runs; built this session, compiled clean for sm_90 / sm_120). Its GPU test (bit
# for bit, eager and graph); moe_layer / moe_routed at C = 64 beside n = 2, 3, 4, 6 on the same inputs; paired step
# trials at C = 64.
#   run(command="KB_TOTAL_S=330 KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session34f.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-330}
source scripts/device_lib.sh || exit 1
step copy 30 $KB calibrate --measure copy_gbps
step gpu_pf 80 python3 -m pytest -q -m gpu tests/test_moe.py -k prefetch
step pf64 110 $KB bench moe_layer moe_routed --module scripts/gate_variants.py --impl triton --impl triton_pf2 \
    --impl triton_pf3 --impl triton_pf4 --impl triton_pf6 --shapes flash-tp8 --batch 64 --where hash=False --max-time 0.3
step trial64 120 $KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 64 --steps 30 \
    --try 'moe_routed@T=64={"PREFETCH_EXPERTS": 2}' --try 'moe_routed@T=64={"PREFETCH_EXPERTS": 4}' \
    --json "$W/trial64.json"
finish
