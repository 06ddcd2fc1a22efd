#!/usr/bin/env bash
# Session 21, call 2: tune the step's keys that decode-bench reported as untuned at C = 16 / 64 (call 1's table:
# attention_front, attention_q, the gate GEMM (bf16_linear N = 256), grouped_wo_a all ran their defaults) into a copy
# of the packaged table, then the 43-layer step A B A B, packaged table (a) against the copy (b: KERNELBENCH_TUNED).
# (0) verify first, into the same database: tune's export refuses a choice whose path has no passing verify.
#   run(command="KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session21b.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-570}
source scripts/device_lib.sh || exit 1
step verify 90 $KB verify attention_front attention_q bf16_linear grouped_wo_a --impl triton --device cuda \
    --shapes flash-tp8 --examples 2 --time-budget 8
cp kernelbench/tuned/v1.json "$W/tuned.json"
TUNE="$KB tune --shapes flash-tp8 --impl triton --max-trials 16 --top-k 3 --rounds 2 --trial-timeout 20 --export $W/tuned.json"
step tune_front 85 $TUNE attention_front attention_q --where M=16,64 --where compressed=False --budget 75
step tune_gate 75 $TUNE bf16_linear --where N=256 --where M=16,64 --budget 65
step tune_woa 75 $TUNE grouped_wo_a --where T=16,64 --budget 65
DB="$KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 1,16,64"
step a1 45 $DB --json "$W/a1.json"
step b1 45 env KERNELBENCH_TUNED="$W/tuned.json" $DB --json "$W/b1.json"
step a2 35 $DB --json "$W/a2.json"
step b2 35 env KERNELBENCH_TUNED="$W/tuned.json" $DB --json "$W/b2.json"
step_times a1 b1 a2 b2
finish
