#!/usr/bin/env bash
# Session 56's second call (written in session 55). On an H200, the card issue 9 names (none came since session 46):
# the copy ceiling and issue 9's table beside the triton_kernels peer, the four MoE ops' verify (issue 9's "done
# when"), then the 43-layer step with its attribution (issue 17's measure). On an H100: the tune of the FP8 attention
# cache's space at 64 tokens and the step with attribution only.
#   run(command="KB_TOTAL_S=560 KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session56b.sh", carry=[".whl", ".gpu_peers"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-560}
source scripts/device_lib.sh || exit 1
issue9_table_on_h200
issue9_verify_on_h200
if ! grep -q "H200" "$W/environment.txt"; then
    step tune_fp8kv64 120 $KB tune sparse_attention --impl triton_fp8kv --shapes flash-tp8 --where T=64 \
        --where ctx=512 --max-trials 24 --top-k 3 --rounds 2 --budget 100 --export "$W/tuned.json"
fi
step_attributed
finish
