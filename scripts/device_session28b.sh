#!/usr/bin/env bash
# Prepared in session 28 (no device was lent that session; not yet run). Issue 17: a ticketed stage costs ~1.4 us
# (calibrate's ticket_us, session 27), a dependent launch with PDL ~0.7 us, and the one-token chain takes about ten of
# each a layer. (1) scripts/latency_probes.py: where a stage's ~0.75 us atomic goes (a ticket per group of 1 / 8 / 32
# programs, two-level trees, at 132 and 528 programs); (2) the GPU tests of the probes and of the timing refactor of
# session 27 (timing.time_replays, never run on a GPU); (3) attention_q and indexer_q with one ticket stage instead of
# two (config SPLIT_SUM "head", kernels/linear.py fp8_tile_head_ticket) alone at one token, beside the shipped
# configs (scripts/latency_variants.py), every output rechecked; verify of both ops on the GPU, the SPLIT_SUM "head"
# variants at the Flash TP8 cases (verify's covering set cannot hold them: the "tiny" K = 128 has no split); (4) the
# step at C = 1 with attention_q's tuned entry + SPLIT_SUM "head", and with indexer_q's one-launch GEMV (session 23's
# shape; the default there is two launches) + SPLIT_SUM "head", 40 pairs each.
#   run(command="KB_TOTAL_S=450 KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session28b.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-450}
source scripts/device_lib.sh || exit 1
step probes 90 python3 scripts/latency_probes.py --json "$W/probes.json" --max-time 0.2
step gpu_tests 90 python3 -m pytest -q -rA -p no:cacheprovider -m gpu tests/test_latency_probe.py tests/test_timing.py
step alone 80 $KB bench attention_q indexer_q --impl triton --impl triton_headsum --impl triton_gemv \
    --impl triton_gemv_headsum --module scripts/latency_variants.py --shapes flash-tp8 --batch 1 --max-time 0.2 \
    --json "$W/alone.json"
step verify 90 $KB verify attention_q indexer_q --impl triton --impl triton_headsum --impl triton_gemv_headsum \
    --kernel-module scripts/latency_variants.py --device cuda --shapes flash-tp8
AQ='{"BM": 1, "BN": 64, "NB": 1, "RB": 1, "SPLIT": 8, "num_stages": 1, "num_warps": 4, "SPLIT_SUM": "head"}'
IQ='{"BM": 1, "BN": 64, "NB": 1, "SPLIT": 8, "num_warps": 4, "num_stages": 1, "RB": 16, "PATH": "fused", "EPI_WARPS": 2, "SPLIT_SUM": "head"}'
step step_c1 150 $KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 1 --steps 40 \
    --try "attention_q@M=1=$AQ" --try "indexer_q@T=1=$IQ" --json "$W/step_c1.json"
finish
