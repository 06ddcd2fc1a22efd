#!/usr/bin/env bash
# One-GPU dry run of scripts/tp_nccl.py (about 40 s on an H200 with a cold Triton cache): torchrun with one
# process, an NCCL group at world 1 (the collectives go through NCCL and into the CUDA graph), Flash widths,
# one SWA layer: checkpoint written and loaded, check against TP1, decode bench with and without the
# collectives at C = 1, 16, per-op attribution, database, report. Results under ${1:-$OUT/tpnccl}.
# Run from the repository root after `source scripts/device_env.sh`.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R="${1:-$OUT/tpnccl}"; mkdir -p "$R"
export KERNELBENCH_DB="sqlite:///$R/kb.sqlite"
python3 -m torch.distributed.run --standalone --nproc-per-node 1 scripts/tp_nccl.py --check-layers swa \
    --tokens 8 --batches 1,16 --steps 5 --warmup 1 --checkpoint /tmp/tpnccl-ck --out "$R" > "$R/run.log" 2>&1
rc=$?
echo "tp_nccl dry run rc=$rc"
grep -h "tp_nccl \|Error\|Traceback" "$R/run.log" | head -n 30
exit $rc
