#!/usr/bin/env bash
# Shared prologue of the device-call scripts (device_all.sh, device_session2.sh, device_session3*.sh): sourced after `cd` to the
# repository root with TOTAL (the call's seconds) set. Installs the carried wheels and the project, points the
# database and data dir into $W, records the environment, and defines `step NAME SECONDS COMMAND...`, `step_times`
# (a hard time limit, never past TOTAL; log in $W/NAME.log, status in $W/status.txt), exports the carried
# peer/official paths with NVLink multicast off, and defines `finish` (pack $W into $OUT/results.tgz).
T0=$(date +%s)
OUT="${OUT:-/tmp/kb_out}"
W=/tmp/kb_results
rm -rf "$W"; mkdir -p "$W"
source scripts/device_env.sh || { echo "device_env.sh failed"; exit 1; }
export KERNELBENCH_HOME="$W/home" KERNELBENCH_QUIET_TUNING=1 KERNELBENCH_DB="sqlite:///$W/kernelbench.sqlite"
export KERNELBENCH_GIT_COMMIT="${KERNELBENCH_GIT_COMMIT:-unknown}"
KB="python3 -m kernelbench"
# carried, never committed: the MoE peer's source (.gpu_peers) and DeepSeek's inference/ folder (.gpu_official)
# (exported only when carried: a named but absent peer folder is an error in every kernelbench command)
if [ -d "$PWD/.gpu_peers/triton_kernels" ]; then export KERNELBENCH_TRITON_KERNELS="$PWD/.gpu_peers/triton_kernels"; fi
if [ -d "$PWD/.gpu_official/inference" ]; then export KB_OFFICIAL="$PWD/.gpu_official/inference"; fi
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1   # NVLink multicast off
step() {  # step NAME SECONDS COMMAND...: hard limit, never past TOTAL
    local name=$1 limit=$2; shift 2
    local t=$(date +%s) left=$(( TOTAL - ($(date +%s) - T0) ))
    if [ "$left" -lt 15 ]; then echo "$name skipped: ${left}s left" | tee -a "$W/status.txt"; return; fi
    if [ "$limit" -gt "$left" ]; then limit=$left; fi
    echo "=== $name (limit ${limit}s, at $(( t - T0 ))s) ==="
    timeout -k 10 "$limit" "$@" > "$W/$name.log" 2>&1
    echo "$name rc=$? wall=$(( $(date +%s) - t ))s" | tee -a "$W/status.txt"
    tail -n 25 "$W/$name.log"
    # what the steps so far left, packed now: a call cut at its limit (or the session's device time) still brings
    # them back under $OUT (finish packs again at the end, with the database's WAL folded in)
    tar czf "$OUT/results.tgz" -C "$W" --exclude=./home . 2>/dev/null
}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > "$W/environment.txt" 2>&1
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" >> "$W/environment.txt"
echo "commit $KERNELBENCH_GIT_COMMIT" >> "$W/environment.txt"
installed() {  # installed REL_PATH: the copy of a checkout file (kernels/x.py, kernelbench/..., reference/...) that
    # python imports on the device: device_env.sh installs the project into /tmp/kb, so editing the checkout after it
    # changes nothing (session 12, call 2). Same-call A/B of a source file: cp VARIANT "$(installed kernels/moe.py)"
    case "$1" in
        kernels/*|reference/*|db/*) echo "/tmp/kb/kernelbench/$1" ;;
        kernelbench/*) echo "/tmp/kb/$1" ;;
        *) echo "installed: $1 is not a package file" >&2; return 1 ;;
    esac
}
variant_of() {  # variant_of REL_PATH BASE NEW SED_EXPR: same-call A/B of one source file. Saves the installed copy of
    # REL_PATH as $W/BASE.py, writes $W/NEW.py with SED_EXPR applied, and appends the number of changed lines to
    # $W/patch_lines.txt (1 for a one-constant patch; 0 means the pattern no longer matches the code)
    local f; f="$(installed "$1")" || return 1
    cp "$f" "$W/$2.py" && sed "$4" "$f" > "$W/$3.py" || return 1
    diff "$W/$2.py" "$W/$3.py" | grep -c '^>' >> "$W/patch_lines.txt"
}
use_variant() {  # use_variant REL_PATH NAME: put $W/NAME.py (from variant_of) in place of the installed REL_PATH
    cp "$W/$2.py" "$(installed "$1")"
}
issue9_table_on_h200() {  # on an H200 (the card issue 9 names): the copy ceiling, then moe_layer and moe_experts beside
    # the triton_kernels peer (carry .gpu_peers), in $W/issue9.json; elsewhere nothing
    if grep -q "H200" "$W/environment.txt"; then
        step copy 30 $KB calibrate --measure copy_gbps
        step issue9 150 $KB bench moe_layer moe_experts --impl triton --impl triton_kernels --shapes flash-tp8 \
            --max-time 0.3 --json "$W/issue9.json"
    fi
}
issue9_verify_on_h200() {  # on an H200: issue 9's "done when" verify of the four MoE ops; elsewhere nothing
    if grep -q "H200" "$W/environment.txt"; then
        step verify9 200 $KB verify moe_gate moe_experts shared_expert moe_layer --impl triton --device cuda \
            --shapes flash-tp8 --examples 3
    fi
}
step_attributed() {  # the 43-layer step at C = 1 / 16 / 64 with its per-op attribution, in $W/step.json
    step step 150 $KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 1,16,64 --profile \
        --json "$W/step.json"
    step_times step
}
finish() {  # fold the database's WAL in, drop the scratch home, pack $W into $OUT/results.tgz, print the status
    python3 -c "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); c.execute('PRAGMA wal_checkpoint(TRUNCATE)')" \
        "$W/kernelbench.sqlite" 2>/dev/null
    rm -rf "$W/home"
    tar czf "$OUT/results.tgz" -C "$W" .
    echo "=== done in $(( $(date +%s) - T0 ))s ==="
    cat "$W/status.txt"
}
step_times() {  # step_times NAME...: each $W/NAME.json's decode-bench step per C on one line, also into status.txt
    python3 - "$W" "$@" <<'PY' | tee -a "$W/status.txt"
import json, sys, pathlib
w = pathlib.Path(sys.argv[1])
for name in sys.argv[2:]:
    p = w / f"{name}.json"
    if p.exists():
        print(name, " ".join(f"C={q['batch']}: {q['step_ms']:.3f} ms" for q in json.loads(p.read_text())["points"]))
PY
}
ncu_path() {  # the Nsight Compute binary on the device (PATH, else the newest /opt/nvidia/nsight-compute), noted in
    # environment.txt: NCU=$(ncu_path)
    local ncu; ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
    echo "ncu: $ncu" >> "$W/environment.txt"
    echo "$ncu"
}
ab_setup() {  # ab_setup REL_PATH BEFORE_FILE: same-call A/B of one package file (kernels/x.py) against a carried
    # older version (scripts/ab/...): $W/ab_new.py (the installed copy) and $W/ab_before.py, for `use_variant`;
    # then `ab_use before` / `ab_use new`. Ends with `ab_use new` before `finish`.
    AB_REL=$1
    [ -f "$2" ] || { echo "$2 missing (carry its folder)"; return 1; }
    cp "$(installed "$AB_REL")" "$W/ab_new.py" && cp "$2" "$W/ab_before.py"
}
ab_use() {  # ab_use before|new (after ab_setup)
    case "$1" in
        before|new) use_variant "$AB_REL" "ab_$1" ;;
        *) echo "ab_use: before or new, got $1" >&2; return 1 ;;
    esac
}
judge_tuned() {  # judge_tuned SECONDS BATCHES: the step at C = BATCHES (comma-separated), 30 interleaved pairs, with
    # each entry the call's tunes exported to $W/tuned.json tried in it (--try-entries; those faster merged into
    # $W/keep.json); without an export, the step with its A/A control only. Step name trial_step.
    local entries=()
    if [ -s "$W/tuned.json" ]; then entries=(--try-entries "$W/tuned.json" --keep-faster "$W/keep.json"); fi
    step trial_step "$1" $KB decode-bench --device cuda --impl triton --graph on --layers flash --batches "$2" \
        --steps 30 "${entries[@]}" --json "$W/trial_step.json"
}
