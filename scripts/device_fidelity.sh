#!/usr/bin/env bash
# Issue 11 on the H200: our decoder against DeepSeek's official inference code (model.py with kernelbench's
# pure-PyTorch kernel substitutes on CUDA, or its TileLang kernels where `tilelang` is installed), on a
# Flash-width checkpoint (4 layers: SWA, SWA, CSA, HCA; 8 experts; vocab 4096), where fp64 GEMM accumulation
# moves the official logits (a non-zero noise floor), then on the tiny config. Run from the repository root:
#   KB_OFFICIAL=/path/to/inference OUT=/tmp/out bash scripts/device_fidelity.sh
# Writes $OUT/fidelity/*.json|log. About 3-4 minutes.
set +e
W="$OUT/fidelity"; mkdir -p "$W"
export KERNELBENCH_DB="${KERNELBENCH_DB:-sqlite:////tmp/kb-fidelity.sqlite}" TRITON_INTERPRET=0
KB="python3 -m kernelbench"
F="$KB fidelity --official ${KB_OFFICIAL:?set KB_OFFICIAL to the official inference/ folder} --device cuda"
run() {  # run NAME SECONDS ARGS...
    local name=$1 limit=$2; shift 2
    local t=$(date +%s)
    timeout -k 5 "$limit" "$@" > "$W/$name.log" 2>&1
    echo "$name rc=$? wall=$(( $(date +%s) - t ))s" | tee -a "$W/status.txt"
}
run ck_flash4 120 $KB make-checkpoint /tmp/fid-flash4 --config flash --layers 4 --experts 8 --vocab 4096 --seed 0 --force
run flash4_triton 120 $F --checkpoint /tmp/fid-flash4 --impl triton --prompts 3 --prefill 300 --steps 32 --json "$W/flash4_triton.json"
run flash4_ref 120 $F --checkpoint /tmp/fid-flash4 --impl reference --prompts 3 --prefill 300 --steps 32 --json "$W/flash4_ref.json"
run flash4_mod_triton 90 $F --checkpoint /tmp/fid-flash4 --impl triton --prompts 2 --prefill 300 --mode modules --json "$W/flash4_mod_triton.json"
run ck_tiny 30 $KB make-checkpoint /tmp/fid-tiny --config tiny --seed 0 --force
run tiny_triton 60 $F --checkpoint /tmp/fid-tiny --impl triton --prompts 8 --prefill 64 --steps 16 --json "$W/tiny_triton.json"
for f in flash4_triton flash4_ref flash4_mod_triton tiny_triton; do
    echo "== $f"; grep -v "Warning\|cfg = \|return config\|│ .* yes │" "$W/$f.log" | tail -n 14
done
