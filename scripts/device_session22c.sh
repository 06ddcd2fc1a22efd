#!/usr/bin/env bash
# Session 22, call 3: (1) verify the mhc ops (config PAIR: the default at 4 < T <= 16 is now an explicit config) and
# the ops to tune; (2) tune the step's untuned keys where the step spends most (mhc_post_pre_norm at T = 16, now
# against the default the step runs; grouped_wo_a, compressor_step ratio 128 and fp8_linear N = 8192 at one token)
# into a fresh file; (3) each choice tried in the step (--try-entries), and at C = 16 / 64 the MoE's K splits, slot
# sort and one-launch gate tried in the step.
#   run(command="KB_TOTAL_S=560 KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session22c.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-560}
source scripts/device_lib.sh || exit 1
step verify 130 $KB verify mhc_pre mhc_post_pre mhc_post_pre_norm grouped_wo_a compressor_step fp8_linear \
    --impl triton --device cuda --shapes flash-tp8 --examples 2 --time-budget 8
TUNE="$KB tune --shapes flash-tp8 --impl triton --max-trials 16 --top-k 3 --rounds 2 --trial-timeout 20"
step tune_mhc 70 $TUNE mhc_post_pre_norm --where T=16 --max-trials 24 --budget 60 --export "$W/tuned.json"
step tune_woa 40 $TUNE grouped_wo_a --where T=1 --where Gl=1 --budget 30 --export "$W/tuned.json"
step tune_comp 50 $TUNE compressor_step --where T=1 --where d=512 --where ratio=128 --budget 40 \
    --export "$W/tuned.json"
step tune_fp8 40 $TUNE fp8_linear --where M=1 --where N=8192 --where K=1024 --budget 30 --export "$W/tuned.json"
TRY=()
if [ -f "$W/tuned.json" ]; then TRY=(--try-entries "$W/tuned.json"); fi
DB="$KB decode-bench --device cuda --impl triton --graph on --layers flash"
MOE=(--try 'moe_routed@T=16,64={"SPLIT_UP": 2, "SPLIT_DOWN": 1}' --try 'moe_routed@T=16,64={"SPLIT_UP": 8, "SPLIT_DOWN": 4}'
     --try 'moe_routed@T=16,64={"ROUTE_SORT": "chunk"}' --try 'moe_routed@T=16,64={"GATE": "mma"}')
step c1 60 $DB --batches 1 "${TRY[@]}" --json "$W/c1.json"
step c16 100 $DB --batches 16 "${TRY[@]}" "${MOE[@]}" --json "$W/c16.json"
step c64 100 $DB --batches 64 "${MOE[@]}" --json "$W/c64.json"
step_times c1 c16 c64
python3 - "$W" <<'PY' | tee -a "$W/status.txt"
import json, pathlib, sys
w = pathlib.Path(sys.argv[1])
for name in ("c1", "c16", "c64"):
    p = w / f"{name}.json"
    for q in json.loads(p.read_text())["points"] if p.exists() else ():
        for t in q["trials"]:
            if t["verdict"].startswith("matched no"):
                continue
            print(f"C={q['batch']} {t['trial'][:100]}: {t['verdict']}", *(
                [f"step {t['step_ms']:.3f} trial {t['trial_ms']:.3f} paired {t['paired_delta_ms']:+.3f} ms"]
                if "pairs" in t else []))
PY
finish
