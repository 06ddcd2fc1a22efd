#!/usr/bin/env bash
# Session 14, call 3: the lanes again, now that the op labels keep each eager kernel's stream (assign_ops dropped it,
# so call 2's lanes were empty): (1) every GPU test (PDL now on by default at one token; the attribution test checks
# two lanes, the side's time below the main's);
# (2) --kernels at the default (PDL at one token) at C = 1 / 16 / 64: kernel table and lanes per C; (3) the same at
# C = 1 without PDL (a per-op table whose kernel spans do not include PDL waits).
#   run(command="KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session14c.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-450}
source scripts/device_lib.sh || exit 1
step gpu_tests 240 python3 -m pytest -q -p no:cacheprovider -o addopts="" -m gpu tests --durations=10
step kernels 120 $KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 1,16,64 --kernels \
    --json "$W/kernels.json"
step kernels_off 60 env KERNELBENCH_PDL=0 $KB decode-bench --device cuda --impl triton --graph on --layers flash \
    --batches 1 --kernels --json "$W/kernels_off.json"
python3 - "$W" <<'PY' | tee -a "$W/status.txt"
import json, sys, pathlib
for name in ("kernels", "kernels_off"):
    p = pathlib.Path(sys.argv[1]) / f"{name}.json"
    if not p.exists():
        continue
    for q in json.loads(p.read_text())["points"]:
        print(f"{name} C={q['batch']}: {q['step_ms']:.3f} ms, {q['kernels_per_layer']:.2f} kernels/layer, lanes {q['lanes']}")
PY
finish
