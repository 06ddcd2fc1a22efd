#!/usr/bin/env bash
# Session 17, call 5: (1) the decoder's attention side lane at a few tokens: `--overlap none` (one stream: PDL's
# early launches chain every kernel; a cross-stream edge is a full dependency) against the default at C = 1, 2, 4,
# A B A B; (2) the MoE's shared expert on its own side stream from 8 tokens (kernels/moe.py SHARED_SIDE_MIN_T = 8,
# patched into the installed copy) against 16 at C = 8, 12, A B A B.
#   run(command="KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session17e.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-300}
source scripts/device_lib.sh || exit 1
DB="$KB decode-bench --device cuda --impl triton --graph on --layers flash"
step a1 110 $DB --batches 1,2,4 --json "$W/a1.json"
step n1 30 $DB --batches 1,2,4 --overlap none --json "$W/n1.json"
step a2 30 $DB --batches 1,2,4 --json "$W/a2.json"
step n2 30 $DB --batches 1,2,4 --overlap none --json "$W/n2.json"
step_times a1 n1 a2 n2
MOE="$(installed kernels/moe.py)"
cp "$MOE" "$W/moe16.py"
sed 's/^SHARED_SIDE_MIN_T = 16$/SHARED_SIDE_MIN_T = 8/' "$W/moe16.py" > "$W/moe8.py"
grep -c "^SHARED_SIDE_MIN_T = 8$" "$W/moe8.py" >> "$W/status.txt"
step s16a 50 $DB --batches 8,12 --json "$W/s16a.json"
cp "$W/moe8.py" "$MOE"; step s8a 50 $DB --batches 8,12 --json "$W/s8a.json"; cp "$W/moe16.py" "$MOE"
step s16b 30 $DB --batches 8,12 --json "$W/s16b.json"
cp "$W/moe8.py" "$MOE"; step s8b 30 $DB --batches 8,12 --json "$W/s8b.json"; cp "$W/moe16.py" "$MOE"
step_times s16a s8a s16b s8b
rm -f "$W/moe16.py" "$W/moe8.py"
finish
