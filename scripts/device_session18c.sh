#!/usr/bin/env bash
# Session 18, call 3: (1) the GPU lane and MoE tests (the KV lane "auto" by default: up to 16 tokens); (2) the copy
# ceiling; (3) issue 9's op table, moe_layer at C = 1, 16, 64, with the slot sort by token (the default) and the
# chunked sort before it (the constant set to 0 in the installed copy), same call; (4) the 43-layer step with the
# defaults (KV lane auto) against KERNELBENCH_KV_LANE=0, A B A B; (5) kernelbench verify of moe_layer (drawn examples).
#   run(command="KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session18c.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-560}
source scripts/device_lib.sh || exit 1
MOE="$(installed kernels/moe.py)"
cp "$MOE" "$W/moe_token.py"
sed 's/^SORT_BY_TOKEN_MAX = 4096$/SORT_BY_TOKEN_MAX = 0/' "$MOE" > "$W/moe_chunk.py"
diff "$W/moe_token.py" "$W/moe_chunk.py" | grep -c '^>' > "$W/patch_lines.txt"      # 1: the one constant
step gputests 100 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_lanes.py tests/test_moe.py
step copy 30 $KB calibrate
LAYER="$KB bench moe_layer --impl triton --shapes flash-tp8 --batch 1 --batch 16 --batch 64 --max-time 0.5"
step layer_t 60 $LAYER --json "$W/layer_t.json"
cp "$W/moe_chunk.py" "$MOE"
step layer_c 45 $LAYER --json "$W/layer_c.json"
cp "$W/moe_token.py" "$MOE"
DB="$KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 1,16,64"
step d1 110 $DB --json "$W/d1.json"
step o1 30 env KERNELBENCH_KV_LANE=0 $DB --json "$W/o1.json"
step d2 30 $DB --json "$W/d2.json"
step o2 30 env KERNELBENCH_KV_LANE=0 $DB --json "$W/o2.json"
step_times d1 o1 d2 o2
step verify 100 $KB verify moe_layer --impl triton --device cuda --shapes flash-tp8 --examples 3
finish
