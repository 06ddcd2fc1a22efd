#!/usr/bin/env bash
# Session 54's first call (written in session 53, reordered in 54 after the first requests found no machine). Config
# W_DOT "codes" of the FP8 wo_a's tensor-core tiles (built in session 53, untimed: the codes given to the dot as bf16,
# each 128-column block's product scaled after it; session 53 measured the FP8 tile 1.2 us slower than bf16 at 64
# tokens alone): its GPU test and verify first, then alone beside the default and the bf16 form, a tune of
# grouped_wo_a at 64 tokens on the codes (the tuned entries there were chosen on the bf16 weight in session 21),
# and the step at C = 16 / 64 with "codes" and each tuned entry tried (20 interleaved pairs each; trimmed to fit
# the device time left after failed requests). On an H200 with
# time left: issue 9's table beside the peer (none since session 46).
#   run(command="KB_TOTAL_S=560 KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session54a.sh", carry=[".whl", ".gpu_peers"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-560}
source scripts/device_lib.sh || exit 1
step gpu_codes 80 python3 -m pytest -q -m gpu -p no:cacheprovider -rs tests/test_wo_a_fp8.py
step verify_codes 60 $KB verify grouped_wo_a --impl triton --device cuda --shapes flash-tp8 --examples 2
step bench_codes 50 $KB bench grouped_wo_a --impl triton --impl triton_bf16 --shapes flash-tp8 --where T=16,64 \
    --max-time 0.3 --try 'grouped_wo_a@T=16,64={"W_DOT": "codes"}' --json "$W/bench_codes.json"
TU="--impl triton --shapes flash-tp8 --max-trials 24 --top-k 3 --rounds 2 --export $W/tuned.json"
step tune_woa64 60 $KB tune grouped_wo_a $TU --where T=64 --budget 50
entries=(); if [ -s "$W/tuned.json" ]; then entries=(--try-entries "$W/tuned.json" --keep-faster "$W/keep.json"); fi
step step_codes 180 $KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 16,64 --steps 20 \
    --try 'grouped_wo_a@T=16,64={"W_DOT": "codes"}' "${entries[@]}" --json "$W/step_codes.json"
issue9_table_on_h200
finish
