#!/usr/bin/env bash
# Session 35, call 9: fp8_linear config XQ "once" (new: the launch's programs quantize x once, each first prefetching
# its weight span into L2; the tiles read codes) against the per-tile quantization, on the same inputs. Calls 4-6
# found the 8 MB / 64-token GEMM bound by its per-K-block chain, x re-quantized once per N tile. The GPU test (racing
# programs, bit-equal to per-tile, graph replay), the op at the Flash shapes with M = 16 / 64, then the step.
#   run(command="KB_TOTAL_S=150 KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session35h.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-150}
source scripts/device_lib.sh || exit 1
step gpu_test 40 python3 -m pytest -q -m gpu tests/test_linear.py -k "fp8_linear_on_gpu"
step xq 60 $KB bench fp8_linear --impl triton --shapes flash-tp8 --where M=16,64 --where N=2048,4096 \
    --where K=4096,2048,1024 --max-time 0.15 --json "$W/xq.json" \
    --try 'fp8_linear@M=16,64={"XQ": "once"}' --try 'fp8_linear@M=16,64={"XQ": "once", "num_stages": 3}'
step trial_step 45 $KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 16,64 --steps 20 \
    --try 'fp8_linear@M=16,64={"XQ": "once"}' --json "$W/trial_step.json"
finish
