#!/usr/bin/env bash
# The measurement run on the GPU machine (one call of about 10 minutes), for issue 6:
#   run(command="KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_measure.sh", carry=[".whl"], timeout_s=600)
# In order, each step under its own time limit so that one slow or hung step cannot take the rest:
#   calibrate -> bench (triton, then the reference peers) -> tune (fp8_linear, moe_experts, indexer_topk,
#   sparse_attention at flash-tp8 C=1,16,64, each with a budget) -> roofline (+PNG) -> scaling
#   (indexer: contexts 512..1M, capacity 8K..1M tokens; sparse attention) -> summary.md
# Everything lands in $OUT: kernelbench.sqlite (every result, raw samples), tuned_v1.json (the
# package's tuned JSON with this device's choices merged in: copy it to kernelbench/tuned/v1.json),
# bench_*.json, roofline.png/json, scaling.png/json, logs/, summary.md. (The sm_120 inspection needs no
# GPU: `kernelbench inspect --target sm_120` runs on the development machine.)
# KB_QUICK=1 shortens every budget (a smoke run).
set -uo pipefail
cd "$(dirname "$0")/.."
T0=$(date +%s)
OUT="${OUT:-/tmp/kb_out}"
mkdir -p "$OUT/logs"
source scripts/device_env.sh || { echo "device_env.sh failed"; exit 1; }
export KERNELBENCH_DB="sqlite:///$OUT/kernelbench.sqlite"
export KERNELBENCH_HOME="$OUT/home"
export KERNELBENCH_QUIET_TUNING=1
if [ -z "${KERNELBENCH_GIT_COMMIT:-}" ]; then
    KERNELBENCH_GIT_COMMIT=$(git rev-parse HEAD 2>/dev/null || echo "unknown")
    export KERNELBENCH_GIT_COMMIT
fi
Q=${KB_QUICK:-0}
scale() { if [ "$Q" = 1 ]; then echo $(( $1 / 4 + 5 )); else echo "$1"; fi; }
KB="python3 -m kernelbench"
STATUS="$OUT/logs/status.txt"
: > "$STATUS"

TOTAL=${KB_TOTAL_S:-560}   # leave the summary and the copy-back time inside a 600 s call
step() {   # step NAME SECONDS COMMAND...: run with a hard limit (never past TOTAL), log, record rc and wall time
    local name=$1 limit=$2; shift 2
    local t=$(date +%s)
    local left=$(( TOTAL - (t - T0) ))
    if [ "$left" -lt 20 ]; then echo "$name skipped: ${left}s left" | tee -a "$STATUS"; return; fi
    if [ "$limit" -gt "$left" ]; then limit=$left; fi
    echo "=== $name (limit ${limit}s, at $(( t - T0 ))s) ==="
    timeout -k 10 "$limit" "$@" > "$OUT/logs/$name.log" 2>&1
    local rc=$?
    echo "$name rc=$rc wall=$(( $(date +%s) - t ))s" | tee -a "$STATUS"
    tail -n 25 "$OUT/logs/$name.log"
}

{
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,power.limit,temperature.gpu --format=csv
    python3 -c "import torch, triton; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__)"
    echo "commit $KERNELBENCH_GIT_COMMIT"
} > "$OUT/environment.txt" 2>&1
cat "$OUT/environment.txt"

TUNED_SRC=$(python3 -c "import kernelbench.tuned_configs as t; print(t.TUNED_DIR / 'v1.json')")
if [ -f "$TUNED_SRC" ]; then cp "$TUNED_SRC" "$OUT/tuned_v1.json"; fi

step calibrate "$(scale 60)" $KB calibrate

# The ops of the decode step that matter most first; every triton impl, then the reference peers. Two
# processes, so that a CUDA fault in one group (which ends its process) leaves the other measured.
BENCH_ARGS="--impl triton --shapes flash-tp8 --batch 1 --batch 16 --batch 64 --context 512 --context 8192 --max-time 0.3 --target-rse 0.02 --max-sets 128"
step bench_triton_gemm "$(scale 75)" $KB bench fp8_linear moe_experts moe_layer shared_expert fp4_linear lm_head \
    $BENCH_ARGS --run-tag "device-triton-gemm" --json "$OUT/bench_triton_gemm.json"
step bench_triton_attn "$(scale 60)" $KB bench sparse_attention indexer_topk act_quant_fp8 rms_norm mhc_pre mhc_post \
    $BENCH_ARGS --run-tag "device-triton-attn" --json "$OUT/bench_triton_attn.json"
step bench_reference "$(scale 35)" $KB bench fp8_linear sparse_attention indexer_topk --impl reference --shapes flash-tp8 \
    --batch 1 --batch 16 --batch 64 --context 8192 --max-time 0.2 --target-rse 0.03 --max-sets 64 \
    --run-tag "device-reference" --json "$OUT/bench_reference.json"

# tune exports only configs whose code path passed `kernelbench verify` on this device (verify_paths.py):
# verify every config path of the tuned ops first, into the same database.
step verify_tuned_ops "$(scale 60)" $KB verify fp8_linear moe_experts indexer_topk sparse_attention --impl triton \
    --device cuda --profile ci --examples 8 --shapes none --json > "$OUT/verify_tuned_ops.json"

# op:budget:context (the indexer's flash-tp8 cases are at context 512, sparse attention's at 8192)
for spec in "fp8_linear:$(scale 45):8192" "moe_experts:$(scale 35):8192" "indexer_topk:$(scale 25):512" \
            "sparse_attention:$(scale 25):8192"; do
    IFS=: read -r op budget ctx <<< "$spec"
    step "tune_$op" $(( budget + 30 )) $KB tune "$op" --shapes flash-tp8 --batch 1 --batch 16 --batch 64 \
        --context "$ctx" --max-trials 8 --top-k 3 --rounds 2 --budget "$budget" --trial-timeout 30 \
        --export "$OUT/tuned_v1.json"
done

step roofline 60 $KB roofline --png "$OUT/roofline.png" --json "$OUT/roofline.json"
step scaling "$(scale 90)" $KB scaling indexer_topk sparse_attention --impl triton --max-time 0.3 \
    --json "$OUT/scaling.json" --png "$OUT/scaling.png"

python3 - "$OUT" <<'PY' > "$OUT/summary.md" 2> "$OUT/logs/summary.err"
import json, sqlite3, sys
from pathlib import Path
out = Path(sys.argv[1])
def load(name):
    p = out / name
    try:
        return json.loads(p.read_text())
    except Exception:
        return None
print("# Device measurement run\n")
print("```\n" + (out / "environment.txt").read_text().strip() + "\n```\n")
print("Steps (rc, wall):\n\n```\n" + (out / "logs" / "status.txt").read_text().strip() + "\n```\n")
db = out / "kernelbench.sqlite"
if db.exists():
    con = sqlite3.connect(db)
    print("## Ceilings (kernelbench calibrate)\n\n| measure | value | unit | method |\n|---|---|---|---|")
    for m, v, u, meth in con.execute("select measure, value, unit, method from calibration order by id"):
        print(f"| {m} | {v:.1f} | {u} | {meth} |")
    print("\n## Tuning (kernelbench tune)\n\n| op | status | trials |\n|---|---|---|")
    for op, st, n in con.execute("select o.name, t.status, count(*) from tune_trial t join implementation i on "
                                 "t.implementation_id = i.id join op o on i.op_id = o.id group by o.name, t.status"):
        print(f"| {op} | {st} | {n} |")
    print("\n| op | shape key | chosen config | us |\n|---|---|---|---|")
    for op, key, cfg, us in con.execute("select o.name, c.shape_key, c.config, c.median_us from tune_choice c join op o "
                                        "on c.op_id = o.id order by c.id"):
        print(f"| {op} | {key} | {cfg} | {us if us is None else round(us, 2)} |")
for name in sorted(p.name for p in out.glob("bench_*.json")):
    data = load(name)
    if not data:
        continue
    print(f"\n## {name} (CUDA-graph replay over rotating inputs unless noted)\n")
    print("| op | impl | shape | median us | q1 | q3 | n | verified | notes |\n|---|---|---|---|---|---|---|---|---|")
    for r in data["results"]:
        note = (r.get("roofline_error") or "") + ("" if r.get("l2_cold", True) else " L2-warm sets")
        print(f"| {r['op']} | {r['impl']} | {r['label'][:70]} | {r['median_us']:.2f} | {r['q1_us']:.2f} | "
              f"{r['q3_us']:.2f} | {r['n']} | {r['verified']} | {note.strip()} |")
sc = load("scaling.json")
if sc:
    print("\n## Scaling (kernelbench scaling)\n\n| op | impl | axis | x | median us | fit a + b x | flags |\n|---|---|---|---|---|---|---|")
    for s in sc["sweeps"]:
        xs = " ".join(f"{p['x']:g}" for p in s["points"])
        ys = " ".join(f"{p['median_us']:.1f}" for p in s["points"])
        fit = s["fit"] or {}
        print(f"| {s['op']} | {s['impl']} | {s['axis']} | {xs} | {ys} | {fit.get('a', 0):.2f} + {fit.get('b', 0):.3g} x | "
              f"{'; '.join(s['flags']) or '-'} |")
rf = load("roofline.json")
if rf:
    print(f"\n## Roofline ({rf['ceilings']['source']}: {rf['ceilings']['gbps']:.0f} GB/s)\n")
    print("| op | impl | shape | bound | floor us | us | % of roof | flag |\n|---|---|---|---|---|---|---|---|")
    for p in rf["points"]:
        if p["median_us"]:
            print(f"| {p['op']} | {p['impl']} | {p['label'][:60]} | {p['bound']} | {p['floor_us']:.2f} | "
                  f"{p['median_us']:.2f} | {100 * p['fraction']:.1f} | {p['flag']} |")
PY
python3 - "$OUT/kernelbench.sqlite" <<'PY'
import sqlite3, sys
con = sqlite3.connect(sys.argv[1]); con.execute("PRAGMA wal_checkpoint(TRUNCATE)"); con.close()
PY
echo "=== done in $(( $(date +%s) - T0 ))s; files in $OUT ==="
cat "$STATUS"
