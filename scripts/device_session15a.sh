#!/usr/bin/env bash
# Next call (written in session 14, not yet run): indexer_q's split-path epilogue in registers (config EPI "rows":
# _indexer_q_epilogue_rows, 16 (token, head) rows per program, Hadamard on tensor cores; interpreter-tested against
# the one-row epilogue, sm_120 / sm_90 clean: 75-78 registers, HMMA, no spills) against the tuned "row" epilogue
# (7.46 us per launch at C = 1 in the step, session 14 call 3): (1) GPU verify with the variant tables; (2) op bench
# at T = 1 and 16; (3) the 43-layer step A B A B at C = 1 and 16. Both arms run the MoE gate's one-bulk-prefetch PDL
# build (8f69d55, compile-checked only): a1 / a2 at C = 1 against session 14's 4.102-4.114 ms re-time it.
#   run(command="KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session15a.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-590}
source scripts/device_lib.sh || exit 1
ROWS='{"BM": 16, "BN": 64, "EPI": "rows", "EPI_WARPS": 4, "PATH": "split", "RB": 16, "SPLIT": 2, "num_stages": 3, "num_warps": 8}'
python3 scripts/tuned_variant.py indexer_q '{"T": 1}' "$ROWS" "$W/rows1.json" | tee -a "$W/status.txt"
python3 scripts/tuned_variant.py indexer_q '{"T": 16}' "$ROWS" "$W/rows16.json" | tee -a "$W/status.txt"
step verify 150 env KERNELBENCH_TUNED="$W/rows1.json" $KB verify indexer_q --impl triton --device cuda \
    --shapes flash-tp8 --examples 6 --time-budget 30
step verify_pdl 150 $KB verify compressor_step bf16_linear moe_gate moe_routed moe_layer --impl triton --device cuda \
    --shapes flash-tp8 --examples 3 --time-budget 6          # their PDL builds at one token (session 14: not verified)
step bench_row 60 $KB bench indexer_q --impl triton --shapes flash-tp8 --batch 1 --json "$W/bench_row.json"
step bench_rows 60 env KERNELBENCH_TUNED="$W/rows1.json" $KB bench indexer_q --impl triton --shapes flash-tp8 \
    --batch 1 --json "$W/bench_rows.json"
DB="$KB decode-bench --device cuda --impl triton --graph on --layers flash"
step a1 90 $DB --batches 1,16 --json "$W/a1.json"
step b1 60 env KERNELBENCH_TUNED="$W/rows1.json" $DB --batches 1 --json "$W/b1.json"
step c1 60 env KERNELBENCH_TUNED="$W/rows16.json" $DB --batches 16 --json "$W/c1.json"
step a2 40 $DB --batches 1,16 --json "$W/a2.json"
step b2 40 env KERNELBENCH_TUNED="$W/rows1.json" $DB --batches 1 --json "$W/b2.json"
step c2 40 env KERNELBENCH_TUNED="$W/rows16.json" $DB --batches 16 --json "$W/c2.json"
step_times a1 b1 c1 a2 b2 c2
finish
