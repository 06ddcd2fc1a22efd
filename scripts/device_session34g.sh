#!/usr/bin/env bash
# Session 34, call 7: issue 17's per-launch table on this card (session 25 has the H200's): the 43-layer step on one
# stream without PDL, every op's kernels by their place in its calls (us per launch), at C = 1 and 64; then the step as
# shipped with the same table at C = 1 (PDL on: spans include the early launch's wait).
#   run(command="KB_TOTAL_S=200 KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session34g.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-200}
source scripts/device_lib.sh || exit 1
step one_stream 100 env KERNELBENCH_PDL=0 $KB decode-bench --device cuda --impl triton --graph on --layers flash \
    --batches 1,64 --overlap none --kernels --json "$W/one_stream.json"
step shipped_c1 60 $KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 1 --kernels \
    --json "$W/shipped_c1.json"
step_times one_stream shipped_c1
finish
