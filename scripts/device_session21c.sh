#!/usr/bin/env bash
# Session 21, call 3: (1) the attention front / q tunes that call 2's budget cut (attention_front M = 64,
# attention_q M = 16 / 64) into f = s + their choices; (2) the 43-layer step, a s f a s f: a the packaged table, s
# the packaged table + call 2's choices that beat their defaults in the op bench (grouped_wo_a T = 16 / 64, the gate
# GEMM bf16_linear M = 16 N = 256; scripts/ab/tuned_sel.json, untracked), f = s + (1). Lookups borrow only within a
# config's family (commit ea99af2: same_family), so C = 1 keeps its GEMV defaults.
#   run(command="KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session21c.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-480}
source scripts/device_lib.sh || exit 1
step verify 60 $KB verify attention_front attention_q --impl triton --device cuda --shapes flash-tp8 --examples 2 \
    --time-budget 8
cp scripts/ab/tuned_sel.json "$W/tuned_s.json"
cp scripts/ab/tuned_sel.json "$W/tuned_f.json"
TUNE="$KB tune --shapes flash-tp8 --impl triton --max-trials 16 --top-k 3 --rounds 2 --trial-timeout 20 --export $W/tuned_f.json"
step tune_front64 120 $TUNE attention_front --where M=64 --where compressed=False --budget 110
step tune_q 110 $TUNE attention_q --where M=16,64 --where compressed=False --budget 100
DB="$KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 1,16,64"
step warm 60 $DB --json "$W/warm.json"
for r in 1 2; do
    step a$r 30 $DB --json "$W/a$r.json"
    step s$r 30 env KERNELBENCH_TUNED="$W/tuned_s.json" $DB --json "$W/s$r.json"
    step f$r 30 env KERNELBENCH_TUNED="$W/tuned_f.json" $DB --json "$W/f$r.json"
done
step_times a1 s1 f1 a2 s2 f2
finish
