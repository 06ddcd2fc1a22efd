#!/usr/bin/env bash
# Session 14, call 2: PDL by token count. (1) GPU tests: PDL bit-equality (test_pdl) and the attribution's lanes
# now taken from the eager step's streams (test_decode_bench); (2) `kernelbench verify` of the ops whose kernels
# take PDL (the default "auto": PDL on at one token); (3) the crossover: the 43-layer step at C = 1, 2, 4, 8
# with KERNELBENCH_PDL 0 / 1, A B A B; (4) the default (auto) against 0 at C = 1 / 16 / 64, A B A B;
# (5) --kernels at the default: the kernel table and the lanes per C.
#   run(command="KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session14b.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-575}
source scripts/device_lib.sh || exit 1
DB="$KB decode-bench --device cuda --impl triton --graph on --layers flash"
step gpu_tests 200 python3 -m pytest -q -p no:cacheprovider -o addopts="" -m gpu tests/test_pdl.py \
    tests/test_decode_bench.py -k "pdl or attribution_adds_up"
step verify 200 $KB verify fp8_linear attention_front attention_q indexer_q mhc_post_pre_norm sparse_attention \
    grouped_wo_a moe_routed moe_layer --impl triton --device cuda --shapes flash-tp8 --examples 3 \
    --time-budget 6
step x0a 60 env KERNELBENCH_PDL=0 $DB --batches 1,2,4,8 --json "$W/x0a.json"
step x1a 60 env KERNELBENCH_PDL=1 $DB --batches 1,2,4,8 --json "$W/x1a.json"
step x0b 30 env KERNELBENCH_PDL=0 $DB --batches 1,2,4,8 --json "$W/x0b.json"
step x1b 30 env KERNELBENCH_PDL=1 $DB --batches 1,2,4,8 --json "$W/x1b.json"
step offa 30 env KERNELBENCH_PDL=0 $DB --batches 1,16,64 --json "$W/offa.json"
step auto 30 $DB --batches 1,16,64 --json "$W/auto.json"
step offb 30 env KERNELBENCH_PDL=0 $DB --batches 1,16,64 --json "$W/offb.json"
step autob 30 $DB --batches 1,16,64 --json "$W/autob.json"
step_times x0a x1a x0b x1b offa auto offb autob
step kernels 90 $DB --batches 1,16,64 --kernels --json "$W/kernels.json"
finish
