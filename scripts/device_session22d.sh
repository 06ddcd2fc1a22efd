#!/usr/bin/env bash
# Session 22, call 4 (the last of the budget): (1) verify and tune more of the step's untuned keys (act_quant_fp8,
# the indexer's weight projection bf16_linear N = 64, the ratio-128 compressor at 16 / 64 tokens, fp8_linear
# N = 8192 K = 1024 at 16 / 64) into a fresh file and try each choice in the step; (2) the step as shipped (the
# packaged table with call 3's two entries, mhc_post_pre_norm and grouped_wo_a verified with them); (3) the GPU ablation test (its step builder was refactored this session).
#   run(command="KB_TOTAL_S=540 KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session22d.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-540}
source scripts/device_lib.sh || exit 1
step verify 110 $KB verify act_quant_fp8 bf16_linear compressor_step fp8_linear mhc_post_pre_norm grouped_wo_a --impl triton --device cuda \
    --shapes flash-tp8 --examples 2 --time-budget 8
TUNE="$KB tune --shapes flash-tp8 --impl triton --max-trials 12 --top-k 3 --rounds 2 --trial-timeout 20 --export $W/tuned.json"
step tune_aq 45 $TUNE act_quant_fp8 --where M=16,64 --where K=4096,1024 --where scale_fmt=ue8m0 --budget 40
step tune_bf 50 $TUNE bf16_linear --where N=64 --where M=1,16,64 --budget 45
step tune_comp 55 $TUNE compressor_step --where T=16,64 --where d=512 --where ratio=128 --budget 50
step tune_fp8 45 $TUNE fp8_linear --where M=16,64 --where N=8192 --where K=1024 --budget 40
TRY=()
if [ -f "$W/tuned.json" ]; then TRY=(--try-entries "$W/tuned.json"); fi
DB="$KB decode-bench --device cuda --impl triton --graph on --layers flash"
step c1 50 $DB --batches 1 "${TRY[@]}" --json "$W/c1.json"
step c16 50 $DB --batches 16 "${TRY[@]}" --json "$W/c16.json"
step c64 50 $DB --batches 64 "${TRY[@]}" --json "$W/c64.json"
step final 40 $DB --batches 1,16,64 --json "$W/final.json"
step_times c1 c16 c64 final
python3 - "$W" <<'PY' | tee -a "$W/status.txt"
import json, pathlib, sys
w = pathlib.Path(sys.argv[1])
for name in ("c1", "c16", "c64"):
    p = w / f"{name}.json"
    for q in json.loads(p.read_text())["points"] if p.exists() else ():
        for t in q["trials"]:
            if not t["verdict"].startswith("matched no"):
                print(f"C={q['batch']} {t['trial'][:100]}: {t['verdict']}", *(
                    [f"step {t['step_ms']:.3f} trial {t['trial_ms']:.3f} paired {t['paired_delta_ms']:+.3f} ms"]
                    if "pairs" in t else []))
PY
step gputest 60 python3 -m pytest -q -m gpu tests/test_decode_bench.py -k ablate
finish
