#!/usr/bin/env bash
# Session 33, call 6: issue 9's table re-measured with bench's new instance roofline (80d1c50: a timed MoE run counts
# the local experts its own inputs route to), ours beside the triton_kernels matmul_ogs peer (carried in .gpu_peers,
# never committed: scripts/get_triton_kernels_peer.sh), the copy ceiling on the same card; the GPU tests of the new
# measure path, the MoE ops and the peer; and issue 9's GPU verify of the MoE ops at the Flash TP8 shapes.
#   run(command="KB_TOTAL_S=420 KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session33d.sh",
#       carry=[".whl", ".gpu_peers"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-420}
source scripts/device_lib.sh || exit 1
step copy 40 $KB calibrate --measure copy_gbps
step moe 170 $KB bench moe_layer moe_experts --impl triton --impl triton_kernels --shapes flash-tp8 --max-time 0.3
step gpu_tests 90 python3 -m pytest -q -m gpu tests/test_timing.py tests/test_moe.py tests/test_peers.py
step verify 80 $KB verify moe_gate moe_experts shared_expert moe_layer --impl triton --device cuda \
    --shapes flash-tp8 --examples 2 --time-budget 6
finish
