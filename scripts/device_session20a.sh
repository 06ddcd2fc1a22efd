#!/usr/bin/env bash
# Prepared in session 19 for the next session's first call (not yet run; session 19's budget was spent):
# (1) kernelbench verify of the MoE ops not verified on the H200 since sessions 12 / 7 (moe_experts, shared_expert);
# (2) the Hadamard butterfly (kernels/common.py fwht128_rows), built in session 19 and only compiled and
#     interpreter-tested: the hadamard op's FWHT config against its tensor-core product (op bench, both in its config
#     space), then KERNELBENCH_HADAMARD=butterfly ("f") against the default matrix form ("d"): verify of indexer_q
#     and compressor_step with it, and the 43-layer step A B A B at
#     C = 1, 16 (the switch shortens the tails of _indexer_q_epilogue, 1,357 -> 295 sm_90 SASS instructions, and of
#     the rotated compressor's _comp_step, 4,089 -> 2,438: both on the csa layers' indexer chain at small C).
#   run(command="KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session20a.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-560}
source scripts/device_lib.sh || exit 1
step verify_moe 90 $KB verify moe_experts shared_expert --impl triton --device cuda --shapes flash-tp8 --examples 2 \
    --time-budget 5
step tune_hadamard 60 $KB tune hadamard --shapes flash-tp8 --no-export --budget 50
KERNELBENCH_HADAMARD=butterfly step verify_f 90 $KB verify indexer_q compressor_step --impl triton --device cuda \
    --shapes flash-tp8 --examples 3 --time-budget 8
DB="$KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 1,16"
for r in 1 2; do
    step d$r $(( r == 1 ? 80 : 25 )) $DB --json "$W/d$r.json"
    KERNELBENCH_HADAMARD=butterfly step f$r $(( r == 1 ? 60 : 25 )) $DB --json "$W/f$r.json"
done
step_times d1 f1 d2 f2
finish
