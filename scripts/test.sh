#!/usr/bin/env bash
# The README's test command: install (CPU torch from this machine's disk, never a CUDA build; Triton
# $KB_TRITON, default 3.6.0, the lower end of the supported range) and run the tests, Triton kernels
# in the interpreter, on every core: pytest-xdist with $KB_WORKERS processes (default: one per core the
# process may use, at most 8; 0 runs in this process). Arguments go to pytest (files, -k, ...; a later
# -n wins). The 15 slowest tests are listed at the end (CI's 20-minute budget: where to trim).
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m pip install -q "setuptools>=64" torch==2.13.0 "triton==${KB_TRITON:-3.6.0}"
python3 -m pip install -q --no-build-isolation -e '.[test]'
export TRITON_INTERPRET=1
cores=$(nproc)
# a crashed worker ends the run (--max-worker-restart 0; a replaced worker once hung the run until CI's limit) and a
# test that runs past KB_TEST_TIMEOUT seconds fails with every thread's stack (pytest-timeout, thread method: it also
# stops a test stuck outside Python); default 1800: the longest test, the registry sweep, took 218 s in a full
# .ci/run on 2 cores
python3 -m pytest -q -p no:cacheprovider -n "${KB_WORKERS:-$((cores < 8 ? cores : 8))}" --dist loadgroup \
    --max-worker-restart 0 --timeout "${KB_TEST_TIMEOUT:-1800}" --timeout-method thread --durations 15 "$@"
