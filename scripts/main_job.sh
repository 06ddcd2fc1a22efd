#!/usr/bin/env bash
# The README's main-job command: install (CPU torch from this machine's disk, never a CUDA build),
# write a tiny random checkpoint in the official DeepSeek-V4 layout, prefill a ragged batch of prompts
# and decode tokens from it with the reference model, then with the Triton decoder (the interpreter on
# a CPU: a shorter run, it is ~100x slower there), then list the op registry with its roofline counts.
#   scripts/main_job.sh                       # defaults
#   scripts/main_job.sh --impl triton         # the Triton decoder (TRITON_INTERPRET=1 is set on a CPU)
#   scripts/main_job.sh --tp 2                # two CPU processes, gloo
# KB_CKPT=DIR keeps the checkpoint in DIR (reused when it already holds one).
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m pip install -q "setuptools>=64" torch==2.13.0 triton==3.6.0
python3 -m pip install -q --no-build-isolation -e .
if ! python3 -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)"; then
    export TRITON_INTERPRET=1
fi
CKPT="${KB_CKPT:-$(mktemp -d)/tiny}"
if [ ! -f "$CKPT/config.json" ]; then
    python3 -m kernelbench make-checkpoint "$CKPT" --config tiny --seed 0
fi
python3 -m kernelbench generate --checkpoint "$CKPT" --batch 2 --prompt-len 24 --steps 8 "$@"
python3 -m kernelbench generate --checkpoint "$CKPT" --impl triton --batch 2 --prompt-len 6 --steps 3 --no-mtp
python3 -m kernelbench list --shapes flash-tp8
