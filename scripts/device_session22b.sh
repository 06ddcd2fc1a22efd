#!/usr/bin/env bash
# Session 22, call 2: configs judged in the step (decode-bench --try / --try-entries, new this session).
# (1) the new GPU test; (2) verify + tune mhc_post_pre_norm at T = 1, 16, 64 (never tuned; 85 launches pairs a step)
# into a fresh file, then each chosen entry tried in the step; (3) at C = 16 / 64: the MoE glue "v4" (the finishing
# inside the GEMM launches, measured slower above 4 tokens in session 5, before BDIAG / BM 8 / the splits) and at
# C = 16 session 21's shared-expert fp8 slice tunes (24-30% faster alone, +0.8-1.1% in the C = 64 step).
#   run(command="KB_TOTAL_S=560 KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session22b.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-560}
source scripts/device_lib.sh || exit 1
step gputest 100 python3 -m pytest -q -m gpu tests/test_trials.py
step verify 70 $KB verify mhc_post_pre_norm --impl triton --device cuda --shapes flash-tp8 --examples 2 \
    --time-budget 10
step tune 150 $KB tune mhc_post_pre_norm --shapes flash-tp8 --impl triton --where T=1,16,64 --max-trials 12 \
    --top-k 3 --rounds 2 --trial-timeout 20 --budget 140 --export "$W/tuned_mhc.json"
MHC=()
if [ -f "$W/tuned_mhc.json" ]; then MHC=(--try-entries "$W/tuned_mhc.json"); fi
DB="$KB decode-bench --device cuda --impl triton --graph on --layers flash"
V4='moe_routed@T=16,64={"GLUE": "v4"}'
W13='{"BM": 16, "BN": 64, "NB": 1, "PATH": "v2", "SPLIT": 16, "X_OPERAND": "A", "num_stages": 3, "num_warps": 4}'
W2='{"BM": 16, "BN": 64, "NB": 1, "PATH": "v2", "SPLIT": 1, "X_OPERAND": "B", "num_stages": 2, "num_warps": 4}'
SLICES="fp8_linear@M=16@N=256@K=4096=$W13;fp8_linear@M=16@N=4096@K=256=$W2"
step c64 110 $DB --batches 64 --try "$V4" "${MHC[@]}" --json "$W/c64.json"
step c16 110 $DB --batches 16 --try "$V4" --try "$SLICES" "${MHC[@]}" --json "$W/c16.json"
step c1 80 $DB --batches 1 "${MHC[@]}" --json "$W/c1.json"
step_times c64 c16 c1
python3 - "$W" <<'PY' | tee -a "$W/status.txt"
import json, pathlib, sys
w = pathlib.Path(sys.argv[1])
for name in ("c64", "c16", "c1"):
    p = w / f"{name}.json"
    for q in json.loads(p.read_text())["points"] if p.exists() else ():
        for t in q["trials"]:
            print(f"C={q['batch']} {t['trial'][:90]}: {t['verdict']}", *(
                [f"step {t['step_ms']:.3f} trial {t['trial_ms']:.3f} paired {t['paired_delta_ms']:+.3f} ms"]
                if "pairs" in t else []))
PY
finish
