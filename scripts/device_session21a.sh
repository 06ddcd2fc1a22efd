#!/usr/bin/env bash
# Prepared in session 20 for the next session's first call (not yet run): the GPU-marked tests, the decode-bench
# attribution test first with its report (-rA; session 20's call 5 lost its failure to the step limit; its stream
# count was fixed in c2c1c5e for the KV lane without a GPU), then every other GPU-marked test in files, so that a
# time limit loses at most one file's report.
#   run(command="KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session21a.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-420}
source scripts/device_lib.sh || exit 1
PYT="python3 -m pytest -q -rA -p no:cacheprovider -m gpu"
step gpu_decode 120 $PYT tests/test_decode_bench.py
# Issue 17's attribution at this commit (as session 19's call 2): one stream, no early launch, every kernel listed.
DB="python3 -m kernelbench decode-bench --device cuda --impl triton --graph on --layers flash"
KERNELBENCH_PDL=0 step serial 150 $DB --batches 1,16,64 --overlap none --kernels --json "$W/serial.json"
for f in test_interpreter_defect test_moe test_pdl test_peers test_pytest_plugin test_timing test_tp_nccl test_lanes test_linear; do
    step gpu_$f 60 $PYT tests/$f.py
done
finish
