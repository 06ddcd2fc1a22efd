#!/usr/bin/env bash
# The README's main-job command: install (CPU torch from this machine's disk, never a CUDA build),
# write a tiny random checkpoint in the official DeepSeek-V4 layout, prefill a ragged batch of prompts
# and decode tokens from it with the reference model, then with the Triton decoder (the interpreter on
# a CPU: a shorter run, it is ~100x slower there), then write the op registry with its roofline counts,
# and end with a short summary: what ran, how long, where the outputs are.
#   scripts/main_job.sh                       # defaults
#   scripts/main_job.sh --impl triton         # the Triton decoder (TRITON_INTERPRET=1 is set on a CPU)
#   scripts/main_job.sh --tp 2                # two CPU processes, gloo
# KB_CKPT=DIR keeps the checkpoint in DIR (reused when it already holds one); without it the checkpoint
# lives in a temp dir that is removed at the end. KB_OUT=DIR: where the outputs go (default kb-main-job).
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m pip install -q "setuptools>=64" torch==2.13.0 triton==3.6.0
python3 -m pip install -q --no-build-isolation -e .
if ! python3 -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)"; then
    export TRITON_INTERPRET=1
fi
OUT="${KB_OUT:-kb-main-job}"
mkdir -p "$OUT"
if [ -n "${KB_CKPT:-}" ]; then
    CKPT="$KB_CKPT"; CKPT_NOTE="$CKPT (kept: KB_CKPT)"
else
    TMP_CKPT="$(mktemp -d)"; CKPT="$TMP_CKPT/tiny"; CKPT_NOTE="a temp dir, removed at exit (KB_CKPT=DIR keeps it)"
    trap 'rm -rf "$TMP_CKPT"' EXIT
fi
SUMMARY=()
step() {   # step NAME LOG CMD...: run CMD with its progress on the terminal, its output in LOG, and time it
    local name=$1 log=$2; shift 2
    local t0=$SECONDS
    echo "== $name (output: $log)" >&2
    "$@" > "$log"
    SUMMARY+=("$(printf '%-44s %5d s   %s' "$name" $((SECONDS - t0)) "$log")")
}
if [ ! -f "$CKPT/config.json" ]; then
    step "make-checkpoint tiny" "$OUT/make_checkpoint.txt" python3 -m kernelbench make-checkpoint "$CKPT" --config tiny --seed 0
fi
step "generate, reference model" "$OUT/generate_reference.txt" \
    python3 -m kernelbench generate --checkpoint "$CKPT" --batch 2 --prompt-len 24 --steps 8 "$@"
step "generate, Triton decoder" "$OUT/generate_triton.txt" \
    python3 -m kernelbench generate --checkpoint "$CKPT" --impl triton --batch 2 --prompt-len 6 --steps 3 --no-mtp
step "list ops at Flash TP8 shapes" "$OUT/ops_flash_tp8.txt" python3 -m kernelbench list --shapes flash-tp8
echo
echo "main job done (${SECONDS} s in all):"
printf '  %s\n' "${SUMMARY[@]}"
for f in "$OUT"/generate_*.txt; do
    echo "  $(basename "$f" .txt): $(grep -E 'decode median|logits' "$f" | tr '\n' ' ')"
done
echo "  checkpoint: $CKPT_NOTE"
