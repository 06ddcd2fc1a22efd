#!/usr/bin/env bash
# Prepared in session 24 for the next session (not yet run). (0) The whole GPU test suite (the decode step calls the
# new op sparse_attention_wo_a, a change made after session 24's last GPU run; its JOIN GPU test included). The new op: GPU
# verify (JOIN covered by its config paths) and JOIN (wo_a's GEMV joins the attention's split partials: one launch fewer a layer)
# judged in the step against the two ops, C = 1 / 16, with the A/A control. (1) csa_indices runs on its default since it replaced
# indexer_topk + attention_indices on the csa layers (session 23); indexer_topk's tuned entry at one token (BLOCK_S 64,
# 8 warps, waves 2: decode-bench's unused_entries lists it) is tried on csa_indices in the step, with the A/A control;
# (2) the step attributed once (--profile) at this table, for the per-layer split (issue 17: non-MoE us per layer at
# C = 1) and the side work the main lane waits for.
#   run(command="KB_TOTAL_S=480 KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session25a.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-480}
source scripts/device_lib.sh || exit 1
step gpu_tests 150 python3 -m pytest -q -rA -p no:cacheprovider -m gpu tests
step verify 60 $KB verify sparse_attention_wo_a --impl triton --device cuda --shapes flash-tp8 --examples 2 \
    --time-budget 5
step try 120 $KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 1,16 \
    --try 'sparse_attention_wo_a@T=1,16={"JOIN": true}' \
    --try 'sparse_attention_wo_a@T=1,16={"JOIN": true, "O_WARPS": 8}' \
    --try 'csa_indices@T=1={"BLOCK_S":64,"SCAN":4096,"TOPK_WARPS":16,"num_stages":3,"num_warps":8,"waves":2}' \
    --json "$W/try.json"
step profile 120 $KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 1,16,64 --profile \
    --json "$W/profile.json"
step_times profile
finish
