#!/usr/bin/env bash
# Session 24, call 3: decode-bench --try with its new A/A control (the step captured again, nothing changed, timed
# first at each C; a trial is faster / slower only when its interval clears the control's move). (1) The GPU test of
# --try (tests/test_trials.py -m gpu: the control row). (2) Re-judged under the control: session 23's small table
# entries, each as a trial WITHOUT it (the default pinned at exactly its key: "slower" = the entry helps), and
# attention_front's M = 1 entry (+0.121 ms in session 23) as a known large effect. (3) The routed experts' down-split
# at one token: call 2 found SPLIT_DOWN 8 costly ((8, 8) -0.237 ms against (8, 4)); (8, 2) and (8, 1) here.
#   run(command="KB_TOTAL_S=420 KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session24c.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-420}
source scripts/device_lib.sh || exit 1
step gpu_test 90 python3 -m pytest -q -m gpu tests/test_trials.py
MOE='"BM":8,"BN_UP":64,"BN_DOWN":64,"num_warps":4,"num_stages":3,"DECODE":"fp8_asm","SHARED":"fused","SCALES":"ahead","SHARED_ITEMS":"per_tile","GATE":"fused","BDIAG":true,"BM_SHARED":16'
step try 280 $KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 1,16 \
    --try 'attention_front@DH=512@K=4096@M=1@NQ=1024={}' \
    --try 'attention_q@K=1024@M=1@N=4096={}' \
    --try 'fp8_linear@K=1024@M=1@N=4096={}' \
    --try 'compressor_step@D=4096@T=1@d=512@ratio=4={}' \
    --try 'compressor_step@D=4096@T=16@d=512@ratio=4={}' \
    --try 'attention_indices@T=16@kind=csa@n_max=640={}' \
    --try "moe_routed@T=1={$MOE,\"SPLIT_UP\":8,\"SPLIT_DOWN\":2}" \
    --try "moe_routed@T=1={$MOE,\"SPLIT_UP\":8,\"SPLIT_DOWN\":1}" \
    --json "$W/try.json"
finish
