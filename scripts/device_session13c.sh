#!/usr/bin/env bash
# Session 13, call 3: (1) the step's lanes at C = 1 / 16 / 64 (decode-bench --profile: main stream busy, side
# stream busy, and the side work nothing on the main lane hid); (2) `kernelbench tune` of the side lane's one-token
# ops (bf16_linear: the indexer's weights_proj N = 64 is a flash-tp8 case since this session; compressor_step) into a
# copy of the packaged table, the step at C = 1 A B A B on the packaged table and the copy, and GPU verify of the
# copy.
#   run(command="KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session13c.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-560}
source scripts/device_lib.sh || exit 1
DB="$KB decode-bench --device cuda --impl triton --graph on --layers flash"
step lanes 150 $DB --batches 1,16,64 --profile --json "$W/lanes.json"
cp kernelbench/tuned/v1.json "$W/tuned.json"
step tune 200 $KB tune bf16_linear compressor_step --impl triton --shapes flash-tp8 --batch 1 --max-trials 40 \
    --top-k 3 --rounds 2 --budget 190 --trial-timeout 20 --no-isolate --export "$W/tuned.json"
git diff --no-index --stat kernelbench/tuned/v1.json "$W/tuned.json" | tee -a "$W/status.txt"
step a1 50 $DB --batches 1 --json "$W/a1.json"
step b1 50 env KERNELBENCH_TUNED="$W/tuned.json" $DB --batches 1 --json "$W/b1.json"
step a2 40 $DB --batches 1 --json "$W/a2.json"
step b2 40 env KERNELBENCH_TUNED="$W/tuned.json" $DB --batches 1 --json "$W/b2.json"
python3 - "$W" <<'PY' | tee -a "$W/status.txt"
import json, sys, pathlib
w = pathlib.Path(sys.argv[1])
for name in ("a1", "b1", "a2", "b2"):
    p = w / f"{name}.json"
    if p.exists():
        print(name, " ".join(f"C={q['batch']}: {q['step_ms']:.3f} ms" for q in json.loads(p.read_text())["points"]))
PY
step verify 70 env KERNELBENCH_TUNED="$W/tuned.json" $KB verify bf16_linear compressor_step --impl triton \
    --device cuda --shapes flash-tp8 --examples 4 --time-budget 12
finish
