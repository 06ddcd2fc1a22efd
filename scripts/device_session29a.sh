#!/usr/bin/env bash
# Session 29, call 1: (1) the whole GPU test suite (pytest -m gpu) at the code of sessions 27-28, none of whose kernel
# changes (SPLIT_SUM "head", the fused ops' GEMV at several tokens, indexer_q's epilogue mask, the split top-k's
# short-row fix, the probe's GROUP / LEVELS) nor timing.time_replays has run on a GPU; (2) session 27's prepared trial
# (scripts/device_session28a.sh): the one-program top-k against the split default in the step at 64K, C = 1.
#   run(command="KB_TOTAL_S=560 KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session29a.sh", carry=[".whl", ".gpu_peers"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-560}
source scripts/device_lib.sh || exit 1
step gpu_tests 290 python3 -m pytest -q -rA -p no:cacheprovider -m gpu tests
step step64k_c1 160 $KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 1 \
    --context 65536 --steps 40 --try 'csa_indices={"SEGMENTS": 1}' --try 'csa_indices={"SEGMENTS": 1, "ROW_REGS": 0}' \
    --json "$W/step64k_c1.json"
step alone 60 $KB bench csa_indices --impl triton --impl triton_one --module scripts/attn_variants.py \
    --shapes flash-tp8-long --max-time 0.2 --batch 1 --context 65536 --json "$W/alone.json"
finish
