#!/usr/bin/env bash
# Prepared in session 25 for the next session (not yet run). (1) The whole GPU suite, with the MoE peer carried
# (new since its last run: the GPU test of the combine over column blocks, COMBINE_COLS 64, written after session
# 25's device time was spent); (2) the step as shipped (C = 1 / 16 / 64; session 25's call 8 was cut after C = 1 on a
# cold machine, so the step with the COMBINE_COLS entry has only its paired trial, +0.028 ms at C = 1); (3) COMBINE_COLS
# at 64 tokens, with the A/A control (only C = 1 and 16 were tried: 16 slower with 64 / 128 columns).
#   run(command="KB_TOTAL_S=560 KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session26a.sh",
#       carry=[".whl", ".gpu_peers"])      # .gpu_peers: bash scripts/get_triton_kernels_peer.sh .gpu_peers/triton_kernels
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-560}
source scripts/device_lib.sh || exit 1
step gpu_tests 300 python3 -m pytest -q -rA -p no:cacheprovider --durations=10 -m gpu tests
# the JOIN kernel (a config of sparse_attention_wo_a, not the default) was refactored after session 25's device time
# (its split weights and partial sum are now the combine's helpers, _split_weights / _split_sum): verify both ops
step verify 90 $KB verify sparse_attention sparse_attention_wo_a --impl triton --device cuda --shapes flash-tp8 \
    --examples 2 --time-budget 5
step final 90 $KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 1,16,64 \
    --json "$W/final.json"
step_times final
c() { echo "sparse_attention@T=64={\"COMBINE_COLS\": $1}"; }
step try 120 $KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 64 \
    --try "$(c 64)" --try "$(c 128)" --try "$(c 256)" --json "$W/try.json"
finish
