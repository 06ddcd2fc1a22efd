#!/usr/bin/env python3
"""TP-N DeepSeek-V4 decoder with real collectives (issues 15 and 16); the work is in kernelbench/decoder/tp_nccl.py.

    # issue 15, two GPUs: Flash widths, swa/csa/hca/csa checkpoint, TP2 vs TP1, decode bench with NCCL
    torchrun --standalone --nproc-per-node 2 scripts/tp_nccl.py --out $OUT/tp2
    # issue 16, eight GPUs: TP8 check on the short checkpoint, full-depth Flash (+MTP) drawn in place
    torchrun --standalone --nproc-per-node 8 scripts/tp_nccl.py --bench-layers flash --mtp \\
        --batches 1,16,64,128 --ragged 256:16384 --out $OUT/tp8
    # CPU, gloo (what tests/test_tp_nccl.py runs)
    torchrun --standalone --nproc-per-node 2 scripts/tp_nccl.py --device cpu --config tiny --check-layers swa,csa

NCCL_NVLS_ENABLE=0, TORCH_SYMM_MEM_DISABLE_MULTICAST=1 and NVSHMEM_DISABLE_NVLS=1 are set in every rank
(refused if set otherwise); export them before torchrun as well.
"""
import sys

from kernelbench.decoder.tp_nccl import main

if __name__ == "__main__":
    sys.exit(main())
