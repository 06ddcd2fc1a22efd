#!/usr/bin/env bash
# Session 26, call 4: (1) GPU verify of csa_indices at the long-context set (call 3's 80 s limit cut it; the op the
# decoder's csa layers call, whose top-k now holds rows of up to 16384 scores in registers, ROW_REGS 16384), then
# indexer_topk (the same launches); (2) the whole Flash step at 64K tokens, the default against the radix select
# (--try 'csa_indices={"ROW_REGS": 0}', interleaved pairs with the A/A control) at C = 16, then C = 64.
#   run(command="KB_TOTAL_S=500 KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session26d.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-500}
source scripts/device_lib.sh || exit 1
step verify_csa 170 $KB verify csa_indices --impl triton --device cuda --shapes flash-tp8-long --examples 2 \
    --time-budget 8
R='csa_indices={"ROW_REGS": 0}'
for c in 16 64; do
    step step64k_c$c 140 $KB decode-bench --device cuda --impl triton --graph on --layers flash --batches $c \
        --context 65536 --try "$R" --json "$W/step64k_c$c.json"
done
step verify_topk 90 $KB verify indexer_topk --impl triton --device cuda --shapes flash-tp8-long --examples 2 \
    --time-budget 8
finish
