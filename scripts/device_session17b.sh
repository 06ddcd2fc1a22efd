#!/usr/bin/env bash
# Session 17, call 2: stream priorities (kernels/common.py stream_priority, KERNELBENCH_STREAM_PRIORITY). The
# 43-layer step at C = 1, 16, 64 with every stream at the default priority ("off", the shipped behaviour) against
# the capture stream raised ("main"), main + the ops' own side stream ("main,op": the MoE's shared expert) and
# main + the decoder's side lane ("main,lane"), in the order o b m mo ml ml mo m b o; b = "off" with the decoder
# before Step.fixed_index_lists (variants17/model_before.py, untracked, copied over the installed model.py: the index
# lists of every layer made by that layer); then the GPU priority test.
# Before the call: mkdir -p variants17 && git show d2c8b49:kernelbench/decoder/model.py > variants17/model_before.py
#   && cp kernelbench/decoder/model.py variants17/model_after.py (untracked, not ignored: they travel)
#   run(command="KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session17b.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-440}
source scripts/device_lib.sh || exit 1
DB="$KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 1,16,64"
MODEL="$(installed kernelbench/decoder/model.py)"
step o1 110 env KERNELBENCH_STREAM_PRIORITY=off $DB --json "$W/o1.json"
cp variants17/model_before.py "$MODEL"
step b1 30 env KERNELBENCH_STREAM_PRIORITY=off $DB --json "$W/b1.json"
cp variants17/model_after.py "$MODEL"
step m1 30 env KERNELBENCH_STREAM_PRIORITY=main $DB --json "$W/m1.json"
step mo1 30 env KERNELBENCH_STREAM_PRIORITY=main,op $DB --json "$W/mo1.json"
step ml1 30 env KERNELBENCH_STREAM_PRIORITY=main,lane $DB --json "$W/ml1.json"
step ml2 30 env KERNELBENCH_STREAM_PRIORITY=main,lane $DB --json "$W/ml2.json"
step mo2 30 env KERNELBENCH_STREAM_PRIORITY=main,op $DB --json "$W/mo2.json"
step m2 30 env KERNELBENCH_STREAM_PRIORITY=main $DB --json "$W/m2.json"
cp variants17/model_before.py "$MODEL"
step b2 30 env KERNELBENCH_STREAM_PRIORITY=off $DB --json "$W/b2.json"
cp variants17/model_after.py "$MODEL"
step o2 30 env KERNELBENCH_STREAM_PRIORITY=off $DB --json "$W/o2.json"
step_times o1 b1 m1 mo1 ml1 ml2 mo2 m2 b2 o2
step gputest 60 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_lanes.py -k priority
finish
