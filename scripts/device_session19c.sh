#!/usr/bin/env bash
# Session 19, call 3: why GATE "mma" (kernels/moe.py _gate_mma_kernel) took 34 / 39 us at T = 16 / 64 in call 1
# (the GEMM gate + routing launch it replaces: ~6.9 + 10.3 us at T = 64), per source line: Nsight Compute's source
# counters and warp states of the launch at T = 64 (pinned: moe_routed's default config with GATE "mma"), its
# duration at D splits 16 (default) / 4 / 1, and the routing launch (_gate_route_kernel) beside it for comparison.
#   run(command="KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session19c.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-300}
source scripts/device_lib.sh || exit 1
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
CFG='"BM": 8, "BM_SHARED": 16, "BN_UP": 64, "BN_DOWN": 64, "SPLIT_UP": 4, "SPLIT_DOWN": 2, "num_warps": 4,
 "num_stages": 3, "DECODE": "fp8_asm", "SHARED": "fused", "SCALES": "ahead", "SHARED_ITEMS": "per_tile",
 "BDIAG": true, "GATE": "mma"'
PROF="python3 scripts/profile_op.py moe_routed --batch 64 --where hash=False --where shared=None"
SRC="--section SourceCounters --section WarpStateStats --page source --print-source sass --csv"
KERNELBENCH_PIN_CONFIG="moe_routed={$CFG}" step src_mma 80 "$NCU" --profile-from-start off --clock-control none \
    -k regex:_gate_mma -c 1 $SRC $PROF
for s in 16 4 1; do
    KERNELBENCH_PIN_CONFIG="moe_routed={$CFG, \"GATE_SPLIT_D\": $s}" step sol_s$s 40 "$NCU" --profile-from-start off \
        --clock-control none -k regex:_gate_mma --section SpeedOfLight --section WarpStateStats --csv $PROF
done
step src_route 60 "$NCU" --profile-from-start off --clock-control none -k regex:_gate_route -c 1 $SRC $PROF
for f in "$W"/src_*.log; do gzip -k "$f"; done
finish
