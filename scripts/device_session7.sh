#!/usr/bin/env bash
# Session 7's second H200 call (2026-12-02). Call 1 (scripts/device_session6.sh) verified the session-6 kernels and
# showed the step-level ablation drifting (every op's run without its tuned entries moved the same way by the same
# amount); decode-bench --ablate-tuned now times the two settings interleaved (paired). This call:
#  - verifies fp8_linear, compressor_step, moe_gate and shared_expert (issue 9's list: call 1 had the others) into this call's fresh database (tune refuses to export a config whose
#    code path has no passing verify on the device: call 1's fp8_linear choice was not exported for that reason);
#  - tunes fp8_linear at C = 64 (the keys the step borrowed or ran on defaults) into a copy of the packaged tuned
#    file, $W/tuned.json;
#  - runs the 43-layer step at C = 1 / 16 / 64 on that file with --ablate-tuned (interleaved): does each op's tuned
#    file help or hurt the step, the new fp8_linear entries included;
#  - the GPU tests of decode-bench (the ablation's graph path) and tune.
#   run(command="KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session7.sh", carry=[".whl", ".gpu_peers"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-560}
source scripts/device_lib.sh || exit 1
cp kernelbench/tuned/v1.json "$W/tuned.json"
step calibrate 15 $KB calibrate --measure copy_gbps
step verify 150 sh -c "$KB verify fp8_linear compressor_step moe_gate shared_expert --impl triton --device cuda --shapes flash-tp8 --examples 2 \
    --time-budget 3 --json > $W/verify.json"
step tune_fp8 120 $KB tune fp8_linear --impl triton --shapes flash-tp8 --batch 64 --max-trials 10 --budget 110 \
    --export "$W/tuned.json"
step decode_flash 200 env KERNELBENCH_TUNED="$W/tuned.json" $KB decode-bench --device cuda --impl triton --graph on \
    --layers flash --batches 1,16,64 --ablate-tuned --json "$W/decode_flash.json"
step gpu_tests 70 python3 -m pytest -q -p no:cacheprovider -o addopts="" -m gpu tests/test_decode_bench.py \
    tests/test_tune.py
finish
