#!/usr/bin/env bash
# Session 27, call 2. Call 1 found that ROW_REGS 1024 (the held select compiled into the top-k kernel, never run at
# 64K tokens) makes the step as much slower as ROW_REGS 16384 (-0.21 vs -0.24 ms): the binary, not the select. Here:
# (1) the latency probes of `kernelbench calibrate` (launch_us, launch_pdl_us, ticket_us) with the copy rate; (2) the
# GPU tests of the probes and of the held select (now also held-only kernels: no radix passes compiled in, 1 / 2 / 4
# held block sizes); (3) csa_indices alone at 64K tokens, C = 16 / 64, with the held variants beside the default; (4)
# the whole step at 64K tokens with the held-only kernels (ROW_REGS 32768: decode-bench's key cache holds 16,400+
# entries, so 16384 is not held-only there) and the one-block held select with the radix passes (ROW_REGS 16384,
# ROW_LEVELS 1), 40 pairs each. sm_90 SASS / registers of the top-k kernel (kernelbench's inspector, T = 16, 64K):
# radix 3,433 / 101; ROW_REGS 16384 (4 levels + radix) 7,746 / 107; 16384 L1 + radix 5,153 / 128 (held-only 2,450 / 116);
# 32768 L2 held-only 4,678 / 107; 32768 L1 held-only 3,410 / 114.
#   run(command="KB_TOTAL_S=520 KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session27b.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-520}
source scripts/device_lib.sh || exit 1
step calibrate 60 $KB calibrate --measure copy_gbps --measure launch_us --measure launch_pdl_us --measure ticket_us
step gpu_tests 110 python3 -m pytest -q -rA -p no:cacheprovider -m gpu tests/test_latency_probe.py \
    tests/test_indexer.py
step csa64k 80 $KB bench csa_indices --impl triton --impl triton_held16k --impl triton_held16k_l1 \
    --impl triton_held32k_l1 --impl triton_held32k_l2 --module scripts/attn_variants.py --shapes flash-tp8-long \
    --max-time 0.2 --batch 16 --batch 64 --context 65536 --json "$W/csa64k.json"
for c in 16 64; do
    step step64k_c$c 120 $KB decode-bench --device cuda --impl triton --graph on --layers flash --batches $c \
        --context 65536 --steps 40 --try 'csa_indices={"ROW_REGS": 32768, "ROW_LEVELS": 2}' \
        --try 'csa_indices={"ROW_REGS": 32768, "ROW_LEVELS": 1}' \
        --try 'csa_indices={"ROW_REGS": 16384, "ROW_LEVELS": 1}' --json "$W/step64k_c$c.json"
done
finish
