#!/usr/bin/env bash
# Session 12, call 1: (1) session 11's pending check (prepared then as device_session11f.sh, folded in here): the
# two-launch ratio-4 compressor step at T = 1 as tuned entries in a copy of the packaged table, GPU verify +
# decode-bench --ablate-tuned; (2) moe_layer / moe_routed at C = 16 / 64: the routing launch's options (ROUTE_CH,
# ROUTE_WARPS; and GATE_SPLIT, removed since: scripts/moe_sweep.py --sweep r8), same inputs for every config.
#   run(command="KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session12a.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-540}
source scripts/device_lib.sh || exit 1
TWO='{"BLOCK_N":64,"BLOCK_K":128,"num_warps":4,"num_stages":3,"ROWS":16,"SPLIT":"auto","waves":2,"RB":2,"PATH":"one","EMIT_MAX_T":0}'
python3 scripts/tuned_variant.py compressor_step '{"T": 1, "ratio": 4}' "$TWO" "$W/tuned_two.json"
step sweep 200 python3 scripts/moe_sweep.py --cases moe_layer:64 moe_layer:16 --sweep r8 --baselines --warm 8 \
    --max-time 0.4 --json "$W/sweep.json"
step verify 60 env KERNELBENCH_TUNED="$W/tuned_two.json" $KB verify compressor_step --impl triton --device cuda \
    --shapes flash-tp8 --examples 2 --time-budget 6
step ablate 150 env KERNELBENCH_TUNED="$W/tuned_two.json" $KB decode-bench --device cuda --impl triton --graph on \
    --layers flash --batches 1 --ablate-tuned --json "$W/ablate.json"
finish
