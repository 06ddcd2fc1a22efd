#!/usr/bin/env bash
# Session 31's score launch (kernels/indexer.py `_score_blocks`, kernels/common.py `relu_scale_bf16`), built without a
# device: the head terms two at a time in bf16x2 PTX (config BF16X2, default true) and the whole key blocks loaded
# and stored without masks. sm_90 static SASS of the score loop 688 -> 367 instructions a warp and block. The new
# indexer.py also holds the top-k's 16384 block as two halves when it stages from registers (no spills; session 30's
# default spilled 84-316 B at 64K tokens), so the A/B below times both changes against session 30's code.
# (1) the GPU tests of the indexer, with the new bit-equality test (packed terms against the fp32 path); (2)
# csa_indices alone at 64K, C = 1 / 16 / 64, new against session 30's indexer.py ("before": `mkdir -p scripts/ab &&
# git show 064ced1:kernels/indexer.py > scripts/ab/indexer_s30.py`, carried; it runs on the same common.py); (3)
# the 64K step with paired trials (30 pairs) of BF16X2 off; of waves 8 (the score grid at C = 64: 17 programs a row,
# 1,088 = 4.1 waves of two programs an SM, against 9 a row, 2.2 waves; blocks of 7-8 instead of 14-15); and of the
# top-k split in two held segments (SPLIT_HELD: at C = 64 one program a row leaves 68 of 132 SMs idle). GPU
# verify of csa_indices (every config path, BF16X2 false among them) is scripts/device_session30d.sh's. Session 32
# added (4) trials of HEAD_MMA (the head sum on the tensor cores, opt-in; sm_90 static SASS of the loop 367 -> 265
# a warp and block at 4 warps) at 4 and 8 warps, and its GPU test in (1).
#   run(command="KB_TOTAL_S=460 KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session31a.sh",
#       carry=[".whl", "scripts/ab"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-460}
source scripts/device_lib.sh || exit 1
ab_setup kernels/indexer.py scripts/ab/indexer_s30.py || exit 1
step gpu_test 70 python3 -m pytest -q -m gpu tests/test_indexer.py
ALONE="$KB bench csa_indices --impl triton --shapes flash-tp8-long --batch 1 --batch 16 --batch 64 --context 65536 \
    --where ragged=False --max-time 0.3"
step alone_n 30 $ALONE --json "$W/alone_n.json"
ab_use before; step alone_b 30 $ALONE --json "$W/alone_b.json"
ab_use new; step alone_n2 30 $ALONE --json "$W/alone_n2.json"
rm -f "$W/ab_new.py" "$W/ab_before.py"
step trial 250 $KB decode-bench --device cuda --impl triton --graph on --layers flash --context 65536 \
    --batches 1,64 --steps 30 --try 'csa_indices={"BF16X2": false}' --try 'csa_indices@T=64={"waves": 8}' \
    --try 'csa_indices={"SEGMENTS": 2, "SEG_MIN": 4096, "SPLIT_HELD": true}' --try 'csa_indices={"HEAD_MMA": true}' \
    --try 'csa_indices={"HEAD_MMA": true, "num_warps": 8}' --json "$W/trial.json"
step_times trial
finish
