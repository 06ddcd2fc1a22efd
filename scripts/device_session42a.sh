#!/usr/bin/env bash
# For the next lent card (written in session 41, whose device time ran out): attention_front at 16 / 64 tokens with 32-
# and 64-row blocks (scripts/device_session41f.sh's trials: weights read once or twice instead of four times; both
# compile without spills for sm_120 / sm_90, 214 / 205 registers with the one-pass q tail), the same tiles with their
# tails in a launch of their own (config TAIL "launch", 4 rows a program: the GEMM kernel 100 / 64 registers on sm_120,
# the tail kernel 40), then `kernelbench tune` with its
# climb (session 41: a quarter of --max-trials around the best config) at attention_front's 16 / 64
# token keys, the exports judged in the step. On an H200 first issue 9's table beside the peer (carry .gpu_peers), the
# step with attribution and UP_EARLY "off" against the default (the later steps then spill into a second call).
#   run(command="KB_TOTAL_S=560 KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session42a.sh",
#       carry=[".whl", ".gpu_peers"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-560}
source scripts/device_lib.sh || exit 1
if grep -q "H200" "$W/environment.txt"; then
    step copy 30 $KB calibrate --measure copy_gbps
    step issue9 150 $KB bench moe_layer moe_experts --impl triton --impl triton_kernels --shapes flash-tp8 --max-time 0.3 \
        --json "$W/issue9.json"
    step step_attr 120 $KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 1,16,64 --profile \
        --json "$W/step_attr.json"
    # UP_EARLY (moe_routed's default from 16 tokens) was judged on H100s only (sessions 40, 41)
    step early 70 $KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 16,64 --steps 30 \
        --try 'moe_routed={"UP_EARLY": "off"}' --json "$W/early.json"
fi
B='"BN": 64, "SPLIT": 4, "num_stages": 3, "num_warps": 8, "RB": 16'
L='"BN": 64, "SPLIT": 4, "num_stages": 3, "num_warps": 8, "RB": 4, "Q_NORM": "row", "TAIL": "launch"'
step front 90 $KB bench attention_front --impl triton --shapes flash-tp8 --where M=16,64 --where compressed=False \
    --max-time 0.15 --try "attention_front={\"BM\": 64, $B}" --try "attention_front={\"BM\": 64, \"Q_NORM\": \"row\", $B}" \
    --try "attention_front={\"BM\": 32, \"Q_NORM\": \"row\", $B}" --try "attention_front={\"BM\": 64, $L}" \
    --try "attention_front={\"BM\": 32, $L}" --json "$W/front.json"
V="--impl triton --device cuda --shapes flash-tp8 --examples 1 --time-budget 3"
T="--impl triton --shapes flash-tp8 --max-trials 32 --export $W/tuned.json"
step verify_front 30 $KB verify attention_front $V --where M=16,64
step tune_front64 80 $KB tune attention_front $T --where M=64 --where compressed=False --budget 70
step tune_front16 70 $KB tune attention_front $T --where M=16 --where compressed=False --budget 60
judge_tuned 80 16,64
finish
