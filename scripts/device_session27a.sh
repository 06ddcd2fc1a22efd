#!/usr/bin/env bash
# Prepared in session 26 for the next session (not yet run): why the held top-k select (ROW_REGS 16384) made the step
# at 64K tokens 0.22 ms slower while its kernels got faster (docs/perf/h200-2026-12-04-session26.md). ROW_REGS 1024
# compiles the held path into the kernel (four small blocks, 7K+ SASS instructions against 3.4K) but never runs it at
# 64K tokens (16384-score rows take the radix passes): if that trial is also slower than the default (the radix
# select), the cost is the kernel's size, not the select. sm_90, 16 warps (kernelbench's inspector): radix 3,433 SASS
# instructions / 101 registers, ROW_REGS 1024 7,343 / 99, ROW_REGS 16384 7,746 / 107. C = 16 and 64, 60 pairs each.
#   run(command="KB_TOTAL_S=300 KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session27a.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-300}
source scripts/device_lib.sh || exit 1
for c in 16 64; do
    step step64k_c$c 130 $KB decode-bench --device cuda --impl triton --graph on --layers flash --batches $c \
        --context 65536 --steps 60 --try 'csa_indices={"ROW_REGS": 16384}' --try 'csa_indices={"ROW_REGS": 1024}' \
        --json "$W/step64k_c$c.json"
done
finish
