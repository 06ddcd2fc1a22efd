#!/usr/bin/env bash
# The GPU-only tests (`pytest -m gpu`) on the device machine, in two parts that each fit one call: the whole suite
# took ~9 minutes on an H100 in session 41 (the MoE and indexer files 259 s, the rest ~250 s), more than one call's
# 600 s with the install. Every test is named with its duration; carry the triton_kernels peer for its tests.
#   run(command="KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_gpu_tests.sh moe", carry=[".whl", ".gpu_peers"])
#   run(command="KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_gpu_tests.sh rest", carry=[".whl", ".gpu_peers"])
set -uo pipefail
cd "$(dirname "$0")/.."
PART=${1:-}
HEAVY="tests/test_moe.py tests/test_indexer.py"
case "$PART" in
    moe) FILES="$HEAVY" ;;
    rest) FILES="tests $(for f in $HEAVY; do printf -- '--ignore=%s ' "$f"; done)" ;;
    *) echo "usage: bash scripts/device_gpu_tests.sh moe|rest (the two parts of pytest -m gpu)" >&2; exit 2 ;;
esac
TOTAL=${KB_TOTAL_S:-560}
source scripts/device_lib.sh || exit 1
# shellcheck disable=SC2086 - FILES is a list of paths and options
step "gpu_$PART" "$((TOTAL - 20))" python3 -m pytest -v -m gpu -p no:cacheprovider -rs --durations=25 $FILES
finish
