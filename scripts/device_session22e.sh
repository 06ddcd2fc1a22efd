#!/usr/bin/env bash
# Session 22, call 5 (on call 4's warm machine): the step with call 4's three "faster" entries added to the table.
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-150}
source scripts/device_lib.sh || exit 1
DB="$KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 1,16,64"
step f1 60 $DB --json "$W/f1.json"
step f2 40 $DB --json "$W/f2.json"
step_times f1 f2
finish
