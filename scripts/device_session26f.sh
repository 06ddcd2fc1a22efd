#!/usr/bin/env bash
# Session 26, call 6: why the held select (ROW_REGS 16384, the default) made the step at 64K tokens 0.22 ms slower at
# C = 16 and 64 (call 5, --try of the radix select: faster) while csa_indices alone got faster (call 3). (1) C = 16 on
# one stream (--overlap none): is the loss the side lane's overlap? (2) the per-op attribution at C = 16 with the
# default and with the radix select pinned; (3) C = 1 (the split top-k's held segments) with the --try.
#   run(command="KB_TOTAL_S=260 KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session26f.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-260}
source scripts/device_lib.sh || exit 1
R='csa_indices={"ROW_REGS": 0}'
S="$KB decode-bench --device cuda --impl triton --graph on --layers flash --context 65536"
step serial_c16 90 $S --batches 16 --overlap none --try "$R" --json "$W/serial_c16.json"
step profile_held 50 $S --batches 16 --profile --json "$W/profile_held.json"
step profile_radix 50 env KERNELBENCH_PIN_CONFIG="$R" $S --batches 16 --profile --json "$W/profile_radix.json"
step try_c1 50 $S --batches 1 --try "$R" --json "$W/try_c1.json"
finish
