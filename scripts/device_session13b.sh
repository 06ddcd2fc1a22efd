#!/usr/bin/env bash
# Session 13, call 2: mHC post takes the sublayer output as it comes (x fp32 + x_add bf16, rounded in the kernel;
# kernelbench/decoder/model.py sublayer_kwargs): GPU verify of the three post-family ops (hypothesis draws the fp32
# and fp32 + addend forms), then the step at C = 1 / 16 / 64 A B A B against the same code with the fused branch
# off (sublayer_kwargs' fallback: the former cast / add launch), swapped in the installed copy.
#   run(command="KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session13b.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-540}
source scripts/device_lib.sh || exit 1
step verify 150 $KB verify mhc_post mhc_post_pre mhc_post_pre_norm --impl triton --device cuda --shapes flash-tp8 \
    --examples 20 --time-budget 20
M=$(installed kernelbench/decoder/model.py)
cp "$M" "$W/model_fused.py"
sed 's/^    if env.ops.accepts(op, "x_add"):$/    if False:    # A\/B: the fallback (cast \/ add launch)/' "$M" > "$W/model_cast.py"
grep -c "if False:    # A/B" "$W/model_cast.py" | tee -a "$W/status.txt"         # 1: the swap took
DB="$KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 1,16,64"
step fused1 130 $DB --kernels --json "$W/fused1.json"
cp "$W/model_cast.py" "$M"; step cast1 90 $DB --json "$W/cast1.json"
cp "$W/model_fused.py" "$M"; step fused2 90 $DB --json "$W/fused2.json"
cp "$W/model_cast.py" "$M"; step cast2 90 $DB --json "$W/cast2.json"
cp "$W/model_fused.py" "$M"
python3 - "$W" <<'PY' | tee -a "$W/status.txt"
import json, sys, pathlib
w = pathlib.Path(sys.argv[1])
for name in ("fused1", "cast1", "fused2", "cast2"):
    p = w / f"{name}.json"
    if p.exists():
        pts = json.loads(p.read_text())["points"]
        print(name, " ".join(f"C={q['batch']}: {q['step_ms']:.3f} ms" for q in pts))
PY
finish
