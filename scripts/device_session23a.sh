#!/usr/bin/env bash
# Prepared in session 22 for the next session (not yet run): (1) verify every MoE op and mHC on the GPU at flash-tp8,
# now with the "explicit default" path (the default given as a config runs what no config runs, bit for bit: the
# MoE defaults are inline-PTX decodes, so the CPU tests cannot run it for them); (2) the step's attribution at
# C = 1 / 16 / 64 with issue 17's per-layer measure (decode-bench --profile: the MoE kernels and the rest per layer);
# (3) the next untuned keys tuned and judged in the step, the faster ones merged (--keep-faster) into a copy of the
# packaged table kept in $W (copy it into kernelbench/tuned/v1.json after reading the verdicts).
#   run(command="KB_TOTAL_S=560 KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session23a.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-560}
source scripts/device_lib.sh || exit 1
step verify 150 $KB verify moe_gate moe_experts moe_routed moe_layer shared_expert mhc_pre mhc_post_pre \
    mhc_post_pre_norm mhc_head attention_front attention_q lm_head --impl triton --device cuda --shapes flash-tp8 \
    --examples 2 --time-budget 6
DB="$KB decode-bench --device cuda --impl triton --graph on --layers flash"
step profile 150 $DB --batches 1,16,64 --kernels --json "$W/profile.json"
TUNE="$KB tune --shapes flash-tp8 --impl triton --max-trials 12 --top-k 3 --rounds 2 --trial-timeout 20 --export $W/tuned.json"
step tune_front 60 $TUNE attention_front --where M=1 --budget 55
step tune_lm 60 $TUNE lm_head --where T=16,64 --budget 55
cp kernelbench/tuned/v1.json "$W/v1_kept.json"
TRY=()
if [ -f "$W/tuned.json" ]; then TRY=(--try-entries "$W/tuned.json" --keep-faster "$W/v1_kept.json"); fi
step try 120 $DB --batches 1,16,64 "${TRY[@]}" --json "$W/try.json"
finish
