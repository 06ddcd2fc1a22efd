#!/usr/bin/env bash
# Session 17, call 3: attention_front and attention_q tiles at C = 64 in the 43-layer step (session 14's attribution:
# 18.4 + 5.5 us (act-quant) and 11.3 + 1.6 us per call for 6.3 and 4.2 MB of weights; both default to 16-row blocks,
# so each of the four row blocks reads every weight again). Each candidate pinned (KERNELBENCH_PIN_CONFIG) for one
# decode-bench at C = 64; the fastest front and q candidates then together against the defaults, A B A B.
#   run(command="KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session17c.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-420}
source scripts/device_lib.sh || exit 1
DB="$KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 64"
cfg() { echo "{\"BM\": $1, \"BN\": $2, \"SPLIT\": $3, \"num_warps\": $4, \"num_stages\": 3, \"RB\": 16}"; }
declare -A F=( [f1]="$(cfg 16 64 4 8)" [f2]="$(cfg 32 64 4 8)" [f3]="$(cfg 64 64 8 8)" [f4]="$(cfg 32 64 8 8)"
               [f5]="$(cfg 64 32 8 8)" )
declare -A Q=( [q1]="$(cfg 32 64 2 8)" [q2]="$(cfg 64 64 4 8)" [q3]="$(cfg 16 64 2 8)" [q4]="$(cfg 64 32 2 8)" )
step d0 110 $DB --json "$W/d0.json"
for n in f1 f2 f3 f4 f5; do step $n 30 env KERNELBENCH_PIN_CONFIG="attention_front=${F[$n]}" $DB --json "$W/$n.json"; done
for n in q1 q2 q3 q4; do step $n 30 env KERNELBENCH_PIN_CONFIG="attention_q=${Q[$n]}" $DB --json "$W/$n.json"; done
step_times d0 f1 f2 f3 f4 f5 q1 q2 q3 q4
FP=$(python3 scripts/pick_pins.py "$W" 64 d0= f1="${F[f1]}" f2="${F[f2]}" f3="${F[f3]}" f4="${F[f4]}" f5="${F[f5]}" 2>>"$W/status.txt")
QP=$(python3 scripts/pick_pins.py "$W" 64 d0= q1="${Q[q1]}" q2="${Q[q2]}" q3="${Q[q3]}" q4="${Q[q4]}" 2>>"$W/status.txt")
PIN=""
[ -n "$FP" ] && PIN="attention_front=$FP"
[ -n "$QP" ] && PIN="${PIN:+$PIN;}attention_q=$QP"
echo "combined pin: ${PIN:-none}" | tee -a "$W/status.txt"
step a1 30 $DB --json "$W/a1.json"
step p1 30 env KERNELBENCH_PIN_CONFIG="$PIN" $DB --json "$W/p1.json"
step a2 30 $DB --json "$W/a2.json"
step p2 30 env KERNELBENCH_PIN_CONFIG="$PIN" $DB --json "$W/p2.json"
step_times a1 p1 a2 p2
finish
