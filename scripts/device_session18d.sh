#!/usr/bin/env bash
# Session 18, call 4: the slot sort by token against the chunked sort, interleaved (call 3 ran them one after the
# other and moe_layer came out slower with the token sort, call 2's moe_routed faster): moe_layer and moe_routed op
# bench at C = 16, 64, token / chunk / token / chunk (the constant set to 0 in the installed copy for chunk), then
# Nsight Compute durations of the routing launch (_gate_route_kernel) under both.
#   run(command="KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session18d.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-300}
source scripts/device_lib.sh || exit 1
MOE="$(installed kernels/moe.py)"
cp "$MOE" "$W/moe_token.py"
sed 's/^SORT_BY_TOKEN_MAX = 4096$/SORT_BY_TOKEN_MAX = 0/' "$MOE" > "$W/moe_chunk.py"
diff "$W/moe_token.py" "$W/moe_chunk.py" | grep -c '^>' > "$W/patch_lines.txt"      # 1: the one constant
OPS="$KB bench moe_layer moe_routed --impl triton --shapes flash-tp8 --batch 16 --batch 64 --max-time 0.5"
step t1 70 $OPS --json "$W/t1.json"
cp "$W/moe_chunk.py" "$MOE"
step c1 50 $OPS --json "$W/c1.json"
cp "$W/moe_token.py" "$MOE"
step t2 35 $OPS --json "$W/t2.json"
cp "$W/moe_chunk.py" "$MOE"
step c2 35 $OPS --json "$W/c2.json"
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
NC="$NCU --profile-from-start off --clock-control none -k regex:_gate_route --section SpeedOfLight --csv"
step ncu_chunk 30 $NC python3 scripts/profile_op.py moe_layer moe_routed --batch 16 --batch 64 --where hash=False
cp "$W/moe_token.py" "$MOE"
step ncu_token 30 $NC python3 scripts/profile_op.py moe_layer moe_routed --batch 16 --batch 64 --where hash=False
finish
