#!/usr/bin/env bash
# Prepared in session 27 for the next session (not yet run). At one token and 64K tokens csa_indices takes the split
# top-k (`_index_topk_split`: up to 4 segments of 4096 scores, radix selects, a merge), whose kernel is the largest of
# the step: 9,916 SASS instructions on sm_90 (kernelbench's inspector), against 3,433 for the one-program radix top-k
# and 3,410 for the held-only one (ROW_REGS "auto" at decode-bench's 16,400-entry cache: one 32768 block). Session 27
# found that a larger top-k binary cost the step ~0.2 ms at C = 16 / 64 while its own time did not grow. Trials in the
# whole step at 64K tokens, C = 1, 40 pairs: the one-program top-k (SEGMENTS 1: held-only by "auto"), and the
# one-program radix top-k (SEGMENTS 1, ROW_REGS 0), each against the split default; then csa_indices alone at T = 1.
#   run(command="KB_TOTAL_S=260 KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session28a.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-260}
source scripts/device_lib.sh || exit 1
step step64k_c1 150 $KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 1 \
    --context 65536 --steps 40 --try 'csa_indices={"SEGMENTS": 1}' --try 'csa_indices={"SEGMENTS": 1, "ROW_REGS": 0}' \
    --json "$W/step64k_c1.json"
step alone 60 $KB bench csa_indices --impl triton --impl triton_one --module scripts/attn_variants.py \
    --shapes flash-tp8-long --max-time 0.2 --batch 1 --context 65536 --json "$W/alone.json"
finish
