#!/usr/bin/env bash
# Session 11's fourth H200 call: the one-launch gate's warps per program (GATE_WARPS 1 / 2 against the default 4): a
# same-input sweep, the 43-layer step at C = 1 with each pinned for moe_routed; and the one-token GEMV of
# attention_front / attention_q against the previous tile on one stream (--overlap none: nothing beside them).
#   run(command="KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session11d.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-380}
source scripts/device_lib.sh || exit 1
routed() { (cd /tmp && python3 -c "import json; from kernelbench.kernels.moe import grouped_default as g
print('moe_routed=' + json.dumps({**g({'T': 1, 'shared': True}), 'GATE_WARPS': $1}))"); }
W1=$(routed 1); W2=$(routed 2)
TILE='attention_front={"BM":16,"BN":64,"SPLIT":8,"num_warps":8,"num_stages":3,"RB":1};attention_q={"BM":16,"BN":64,"SPLIT":4,"num_warps":8,"num_stages":3,"RB":1}'
printf 'pins:\n%s\n%s\n%s\n' "$W1" "$W2" "$TILE" >> "$W/environment.txt"
DECODE="$KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 1"
step sweep 60 python3 scripts/moe_sweep.py --sweep r7 --cases moe_gate:1 moe_layer:1 moe_routed:1 --baselines \
    --max-time 0.1 --json "$W/sweep.json"
step decode_w4 110 $DECODE --json "$W/decode_w4.json"
step decode_w1 40 env KERNELBENCH_PIN_CONFIG="$W1" $DECODE --json "$W/decode_w1.json"
step decode_w2 40 env KERNELBENCH_PIN_CONFIG="$W2" $DECODE --json "$W/decode_w2.json"
step decode_w4_again 30 $DECODE --json "$W/decode_w4_again.json"
step decode_w1_again 30 env KERNELBENCH_PIN_CONFIG="$W1" $DECODE --json "$W/decode_w1_again.json"
step one_stream_gemv 35 $DECODE --overlap none --json "$W/one_stream_gemv.json"
step one_stream_tile 35 env KERNELBENCH_PIN_CONFIG="$TILE" $DECODE --overlap none --json "$W/one_stream_tile.json"
finish
