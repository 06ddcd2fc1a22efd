#!/usr/bin/env bash
# Session 56's last call, short (the session's device time nearly spent). On an H200: the copy ceiling and issue 9's
# table beside the triton_kernels peer. Elsewhere: the FP8 cache's GPU tests as session 56 first rewrote them (each
# value within one of its own ulps: failed in this call, data/h100-2026-12-07-session56), the copy ceiling, and the
# indexer and sparse attention at 64 tokens and 64K against it (issue 17's 70% of copy).
#   run(command="KB_TOTAL_S=200 KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session56e.sh", carry=[".whl", ".gpu_peers"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-200}
source scripts/device_lib.sh || exit 1
issue9_table_on_h200
if ! grep -q "H200" "$W/environment.txt"; then
    step gpu_fp8 40 python3 -m pytest -q -m gpu -p no:cacheprovider -rs tests/test_fp8_kv.py
    step copy 30 $KB calibrate --measure copy_gbps
    step c64 90 $KB bench csa_indices sparse_attention --impl triton --shapes flash-tp8-long --where T=64 \
        --where ctx=65536 --max-time 0.3 --json "$W/c64.json"
fi
finish
