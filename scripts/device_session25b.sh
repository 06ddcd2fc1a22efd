#!/usr/bin/env bash
# Session 25, call 2. (1) The whole GPU test suite at HEAD, on a cold machine, with the MoE peer's source carried
# (call 1's run was cut at its 150 s limit after 19 passing tests: the suite compiles its kernels first on a fresh
# machine; session 24 call 4 ran it in 91 s after two warm steps); --durations names the slow ones. (2) Issue 9's
# table beside the peer (triton_kernels matmul_ogs, as vendored in the vLLM 0.17.0 wheel: docs/perf/moe_peer.md):
# copy bandwidth, then moe_layer and moe_experts at the Flash TP8 rank shapes, every output rechecked.
#   run(command="KB_TOTAL_S=470 KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session25b.sh",
#       carry=[".whl", ".gpu_peers"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-470}
source scripts/device_lib.sh || exit 1
step gpu_tests 300 python3 -m pytest -q -rA -p no:cacheprovider --durations=15 -m gpu tests
step calibrate 30 $KB calibrate --measure copy_gbps
step bench 130 $KB bench moe_layer moe_experts --impl triton --impl triton_kernels --shapes flash-tp8 \
    --max-time 0.3 --json "$W/bench.json"
finish
