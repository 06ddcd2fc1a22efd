#!/usr/bin/env bash
# Session 14, call 1: programmatic dependent launch with the next kernel's weights prefetched into L2 before its
# wait (KERNELBENCH_PDL=1; kernels/common.py). (1) GPU tests: the 4-layer step with PDL equals the step without it
# bit for bit at C = 1 / 16 / 64, eager and graph-replayed; (2) the 43-layer step at C = 1 / 16 / 64, PDL off / on
# in the order A B A B A B (same process per run, same code, the switch read per launch); (3) GPU verify of the
# ops whose kernels take PDL, with it on; (4) the lanes and kernel table of the step without PDL (session 13's call 3
# results were lost with its machine).
#   run(command="KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session14a.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-575}
source scripts/device_lib.sh || exit 1
DB="$KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 1,16,64"
step gpu_tests 170 python3 -m pytest -q -p no:cacheprovider -o addopts="" -m gpu tests/test_pdl.py
step a1 120 env KERNELBENCH_PDL=0 $DB --json "$W/a1.json"
step b1 100 env KERNELBENCH_PDL=1 $DB --json "$W/b1.json"
step a2 40 env KERNELBENCH_PDL=0 $DB --json "$W/a2.json"
step b2 40 env KERNELBENCH_PDL=1 $DB --json "$W/b2.json"
step a3 40 env KERNELBENCH_PDL=0 $DB --json "$W/a3.json"
step b3 40 env KERNELBENCH_PDL=1 $DB --json "$W/b3.json"
step_times a1 b1 a2 b2 a3 b3
step verify 100 env KERNELBENCH_PDL=1 $KB verify fp8_linear attention_front attention_q indexer_q mhc_post_pre_norm \
    sparse_attention grouped_wo_a moe_routed moe_layer --impl triton --device cuda --shapes flash-tp8 --examples 3 \
    --time-budget 8
step lanes 90 env KERNELBENCH_PDL=0 $DB --kernels --json "$W/lanes.json"
finish
