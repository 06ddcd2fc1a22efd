#!/usr/bin/env bash
# For the next card (written in session 42): config XQ "gemm" of the fused GEMMs (attention_front, attention_q,
# indexer_q): x quantized in the GEMM's K loop above one row instead of an act_quant launch first (the same codes;
# bit-equal in the interpreter, tests/test_front.py and tests/test_indexer.py; on the GPU at the flash shapes' 16 / 64
# tokens, tests/test_front.py's gpu test, session 43: first), judged in the 43-layer step at C = 16 / 64 (30
# interleaved pairs, A/A control first), then, while time is left, verified with each op's 64-row default pinned with
# XQ "gemm" (an option, so not in verify's covering set). In session 38's H100 attribution the launches it removes
# took 4.6-5.5 us a layer (attention_front), 1.9 (attention_q) and 1.9-3.1 (indexer_q, 21 layers).
# On an H200 (session 43) also issue 9's table beside the triton_kernels peer and the copy ceiling (carry .gpu_peers).
#   run(command="KB_TOTAL_S=480 KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session43b.sh",
#       carry=[".whl", ".gpu_peers"])
# A short call (KB_XQ_EACH=0): the three together only.
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-300}
source scripts/device_lib.sh || exit 1
V="--impl triton --device cuda --shapes flash-tp8 --examples 1 --time-budget 3"
FRONT='{"BM": 64, "BN": 64, "SPLIT": 4, "num_warps": 8, "num_stages": 4, "RB": 4, "Q_NORM": "row", "TAIL": "launch", "XQ": "gemm"}'
Q='{"BM": 16, "BN": 64, "SPLIT": 1, "num_warps": 8, "num_stages": 3, "RB": 16, "PATH": "fused", "XQ": "gemm"}'  # PATH: call 1 lacked it (M = 16's default is "split")
IQ='{"BM": 16, "BN": 64, "SPLIT": 1, "num_warps": 8, "num_stages": 3, "RB": 16, "PATH": "fused", "EPI_WARPS": 2, "XQ": "gemm"}'
step xq_bits 60 python3 -m pytest -q -m gpu -p no:cacheprovider -rs tests/test_front.py -k xq_gemm
ALL='attention_front={"XQ": "gemm"};attention_q@M=64={"XQ": "gemm"};indexer_q@T=64={"XQ": "gemm"}'
TRIES=(--try "$ALL")    # KB_XQ_EACH=1: each op's alone too (a longer call)
if [ "${KB_XQ_EACH:-1}" = 1 ]; then
    TRIES=(--try 'attention_front={"XQ": "gemm"}' --try 'attention_q@M=64={"XQ": "gemm"}'
           --try 'indexer_q@T=64={"XQ": "gemm"}' --try "$ALL")
fi
step step_xq 150 $KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 16,64 --steps 30 \
    "${TRIES[@]}" --json "$W/step_xq.json"
if grep -q "H200" "$W/environment.txt"; then
    step copy 30 $KB calibrate --measure copy_gbps
    step issue9 150 $KB bench moe_layer moe_experts --impl triton --impl triton_kernels --shapes flash-tp8 \
        --max-time 0.3 --json "$W/issue9.json"
fi
# the verifies last (the bit test already ties XQ to the verified defaults): run while time is left
step verify_front 35 env KERNELBENCH_PIN_CONFIG="attention_front=$FRONT" $KB verify attention_front $V --where M=16,64
step verify_q 35 env KERNELBENCH_PIN_CONFIG="attention_q=$Q" $KB verify attention_q $V --where M=16,64
step verify_iq 35 env KERNELBENCH_PIN_CONFIG="indexer_q=$IQ" $KB verify indexer_q $V --where T=16,64 --where Hi=64
finish
