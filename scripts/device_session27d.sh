#!/usr/bin/env bash
# Session 27, call 4: (1) the whole GPU suite with the MoE peer carried, at the new indexer default (ROW_REGS "auto":
# held-only top-k) and with the latency-probe test; (2) the whole step at 8K tokens (decode-bench's key cache there
# holds ~2,070 entries: a 4096 block, rows of 2048 scores), as shipped against the radix select (--try ROW_REGS 0), at
# C = 16 and 64: call 3 judged it at 64K (faster) and at context 512 (level: rows <= K never select).
#   run(command="KB_TOTAL_S=470 KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session27d.sh",
#       carry=[".whl", ".gpu_peers"])      # .gpu_peers: bash scripts/get_triton_kernels_peer.sh .gpu_peers/triton_kernels
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-470}
source scripts/device_lib.sh || exit 1
step gpu_tests 330 python3 -m pytest -q -rA -p no:cacheprovider --durations=10 -m gpu tests
step step8k 110 $KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 16,64 \
    --context 8192 --steps 40 --try 'csa_indices={"ROW_REGS": 0}' --json "$W/step8k.json"
finish
