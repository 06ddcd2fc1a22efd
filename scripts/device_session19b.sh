#!/usr/bin/env bash
# Session 19, call 2: where the non-MoE time of a layer goes (issue 17), kernel by kernel. The 43-layer Flash TP8 step
# with every kernel listed (decode-bench --kernels): (1) one stream, PDL off, so each kernel's span is its own work
# (no early-launch wait inside it) and the spans add up to the chain; (2) the defaults (side stream, PDL) at C = 1.
#   run(command="KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session19b.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-300}
source scripts/device_lib.sh || exit 1
DB="$KB decode-bench --device cuda --impl triton --graph on --layers flash"
KERNELBENCH_PDL=0 step serial 150 $DB --batches 1,16,64 --overlap none --kernels --json "$W/serial.json"
step defaults 90 $DB --batches 1 --kernels --json "$W/defaults.json"
step_times serial defaults
finish
