#!/usr/bin/env bash
# Session 21, call 4: the lookup's batch rule (commit 198cfd7: an entry is never borrowed across the op's batch field)
# in the step, A B C A B C at C = 1 / 16 / 64, all with scripts/ab/tuned_sel.json (the packaged table + call 2's
# grouped_wo_a T = 16 / 64 and gate GEMM M = 16 choices): a = the lookup without the batch rule
# (scripts/ab/tuned_configs_nobatch.py over the installed file), b = with it, c = b + fp8_linear tuned at the
# shared expert's TP-slice keys (N = 256 K = 4096 and N = 4096 K = 256 at M = 16 / 64; the side lane's, which borrowed
# other batches' splits before).
#   run(command="KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session21d.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-420}
source scripts/device_lib.sh || exit 1
TC="$(installed kernelbench/tuned_configs.py)"
cp "$TC" "$W/tc_batch.py"
step verify 60 $KB verify fp8_linear --impl triton --device cuda --shapes none --examples 4 --time-budget 20
cp scripts/ab/tuned_sel.json "$W/tuned_s.json"
cp scripts/ab/tuned_sel.json "$W/tuned_c.json"
TUNE="$KB tune --shapes flash-tp8 --impl triton --max-trials 16 --top-k 3 --rounds 2 --trial-timeout 20 --export $W/tuned_c.json"
step tune_w13 75 $TUNE fp8_linear --where N=256 --where M=16,64 --budget 68
step tune_w2 75 $TUNE fp8_linear --where K=256 --where M=16,64 --budget 68
DB="$KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 1,16,64"
step warm 60 env KERNELBENCH_TUNED="$W/tuned_s.json" $DB --json "$W/warm.json"
for r in 1 2; do
    cp scripts/ab/tuned_configs_nobatch.py "$TC"
    step a$r 30 env KERNELBENCH_TUNED="$W/tuned_s.json" $DB --json "$W/a$r.json"
    cp "$W/tc_batch.py" "$TC"
    step b$r 30 env KERNELBENCH_TUNED="$W/tuned_s.json" $DB --json "$W/b$r.json"
    step c$r 30 env KERNELBENCH_TUNED="$W/tuned_c.json" $DB --json "$W/c$r.json"
done
step_times a1 b1 c1 a2 b2 c2
finish
