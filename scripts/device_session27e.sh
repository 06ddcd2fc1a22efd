#!/usr/bin/env bash
# Session 27, call 5: what a ticketed split-K stage's 1.39 us (call 2) is made of. scripts/latency_probes.py: the
# launch floor at 1 / 132 / 528 programs, with and without PDL; the ticket stage as the kernels take it (acq_rel:
# MEMBAR.ALL.GPU + ATOMG + CCTL.IVALL on sm_90, the last program gathering every partial), release-only (MEMBAR +
# ATOMG), and without the gather (acq_rel; relaxed: the atomic alone). Then calibrate's three latency measures again
# (repeatability against call 2).
#   run(command="KB_TOTAL_S=200 KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session27e.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-200}
source scripts/device_lib.sh || exit 1
step probes 100 python3 scripts/latency_probes.py --json "$W/probes.json"
step calibrate 40 $KB calibrate --measure launch_us --measure launch_pdl_us --measure ticket_us
finish
