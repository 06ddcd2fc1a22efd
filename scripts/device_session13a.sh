#!/usr/bin/env bash
# Session 13, call 1: (1) indexer_q at one token (Hi 64, Qr 1024): the tuned two-launch path against the fused one
# with the BM 1 GEMV (session 12's review made it reachable; never timed on a GPU), op bench per pinned config, the
# new default (fused, f1's config) GPU-verified and ablated in the step at C = 1 (decode-bench --ablate-tuned:
# the tuned split entry against the default, paired); (2) moe_layer at C = 64, SPLIT_UP 4 with the shared expert fused
# (scripts/moe_sweep.py --sweep r10).
#   run(command="KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session13a.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-570}
source scripts/device_lib.sh || exit 1
FUSED='"BM":1,"RB":16,"PATH":"fused","EPI_WARPS":2,"num_stages":1'
declare -A PIN=(
    [f1]="{$FUSED,\"BN\":64,\"NB\":4,\"SPLIT\":2,\"num_warps\":8}"
    [f2]="{$FUSED,\"BN\":64,\"NB\":2,\"SPLIT\":4,\"num_warps\":8}"
    [f3]="{$FUSED,\"BN\":64,\"NB\":1,\"SPLIT\":8,\"num_warps\":4}"
    [f4]="{$FUSED,\"BN\":32,\"NB\":2,\"SPLIT\":4,\"num_warps\":4}"
)
step iq_default 60 $KB bench indexer_q --impl triton --batch 1 --max-time 0.5 --json "$W/iq_default.json"
for name in f1 f2 f3 f4; do
    echo "indexer_q=${PIN[$name]}" > "$W/iq_$name.pin"
    step "iq_$name" 60 env KERNELBENCH_PIN_CONFIG="indexer_q=${PIN[$name]}" $KB bench indexer_q --impl triton --batch 1 \
        --max-time 0.5 --json "$W/iq_$name.json"
done
python3 - "$W" <<'PY' | tee -a "$W/status.txt"
import json, sys, pathlib
for p in sorted(pathlib.Path(sys.argv[1]).glob("iq_*.json")):
    print(p.stem, round(json.loads(p.read_text())["results"][0]["median_us"], 2), "us")
PY
# indexer_q's one-token default is now PATH "fused" with the BM 1 GEMV (f1's config); the packaged table still has the
# T = 1 entry (PATH "split", session 5). verify runs the default with that entry dropped; ablate times the step with
# the entry (split) against without (the fused default), paired
python3 scripts/tuned_variant.py indexer_q '{"T": 1, "Hi": 64}' null "$W/tuned_iq.json"
step verify 90 env KERNELBENCH_TUNED="$W/tuned_iq.json" $KB verify indexer_q --impl triton --device cuda \
    --shapes flash-tp8 --examples 4 --time-budget 12
step ablate 170 $KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 1 --ablate-tuned \
    --json "$W/ablate.json"
step sweep 160 python3 scripts/moe_sweep.py --cases moe_layer:64 --sweep r10 --baselines --warm 8 --max-time 0.4 \
    --json "$W/sweep.json"
finish
