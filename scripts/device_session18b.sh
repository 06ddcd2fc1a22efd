#!/usr/bin/env bash
# Session 18, call 2: the slot sort by token (kernels/moe.py _sort_slots_by_token, ROUTE_SORT "token", the new
# default while tokens x local experts <= SORT_BY_TOKEN_MAX) against the chunked sort before it ("chunk": the constant
# set to 0 in the installed copy), same call: (1) the GPU MoE tests; (2) kernelbench verify of moe_routed / moe_layer
# (drawn examples); (3) moe_routed's op bench at C = 16, 64, token / chunk; (4) the 43-layer step, chunk /
# token / token + KV lane, twice each; (5) Nsight Compute durations of the routing launch
# with the token sort (call 1 has the chunked one's at C = 64: 11.5 us).
#   run(command="KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session18b.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-560}
source scripts/device_lib.sh || exit 1
MOE="$(installed kernels/moe.py)"
cp "$MOE" "$W/moe_token.py"
sed 's/^SORT_BY_TOKEN_MAX = 4096$/SORT_BY_TOKEN_MAX = 0/' "$MOE" > "$W/moe_chunk.py"
diff "$W/moe_token.py" "$W/moe_chunk.py" | grep -c '^>' > "$W/patch_lines.txt"      # 1: the one constant
step gputests 90 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_moe.py
step verify 120 $KB verify moe_routed moe_layer --impl triton --device cuda --shapes flash-tp8 --examples 6
BENCH="$KB bench moe_routed --impl triton --shapes flash-tp8 --batch 16 --batch 64 --max-time 0.5"
step bt1 45 $BENCH --json "$W/bt1.json"
cp "$W/moe_chunk.py" "$MOE"
step bc1 45 $BENCH --json "$W/bc1.json"
DB="$KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 1,16,64"
step c1 110 $DB --json "$W/c1.json"
cp "$W/moe_token.py" "$MOE"
step t1 40 $DB --json "$W/t1.json"
step k1 30 env KERNELBENCH_KV_LANE=1 $DB --json "$W/k1.json"
cp "$W/moe_chunk.py" "$MOE"
step c2 40 $DB --json "$W/c2.json"
cp "$W/moe_token.py" "$MOE"
step t2 30 $DB --json "$W/t2.json"
step k2 30 env KERNELBENCH_KV_LANE=1 $DB --json "$W/k2.json"
step_times c1 t1 k1 c2 t2 k2
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
NC="$NCU --profile-from-start off --clock-control none -k regex:_gate_route --section SpeedOfLight --csv"
step ncu_token 35 $NC python3 scripts/profile_op.py moe_routed --batch 16 --batch 64 --where hash=False
finish
