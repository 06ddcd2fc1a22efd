#!/usr/bin/env bash
# Session 54's first call (written in session 53). On an H200 first issue 9's table beside the peer (none since
# session 46). Then on any card: config W_DOT "codes" of the FP8 wo_a's tensor-core tiles (built in session 53, untimed:
# the codes given to the dot as bf16, each 128-column block's product scaled after it; session 53 measured the FP8
# tile 1.2 us slower than bf16 at 64 tokens alone): alone beside the default and the bf16 form, and in the step at
# C = 16 / 64 (paired trials); on an H200 the done-when verify of issue 9 and the step at 1 / 16 / 64 with attribution.
#   run(command="KB_TOTAL_S=560 KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session54a.sh", carry=[".whl", ".gpu_peers"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-560}
source scripts/device_lib.sh || exit 1
issue9_table_on_h200
step gpu_codes 90 python3 -m pytest -q -m gpu -p no:cacheprovider -rs tests/test_wo_a_fp8.py
step verify_codes 90 $KB verify grouped_wo_a --impl triton --device cuda --shapes flash-tp8 --examples 2
step bench_codes 80 $KB bench grouped_wo_a --impl triton --impl triton_bf16 --shapes flash-tp8 --where T=16,64 \
    --max-time 0.3 --try 'grouped_wo_a@T=16,64={"W_DOT": "codes"}' --json "$W/bench_codes.json"
step step_codes 150 $KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 16,64 --steps 30 \
    --try 'grouped_wo_a@T=16,64={"W_DOT": "codes"}' --json "$W/step_codes.json"
issue9_verify_on_h200
step_attributed
finish
