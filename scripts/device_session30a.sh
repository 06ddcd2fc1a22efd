#!/usr/bin/env bash
# Session 30, call 1: what session 29's last call could not finish. (1) GPU verify of csa_indices / indexer_topk with
# the one-scan stage (fd2f293; call 4's verify was cut by its 40 s limit while compiling); (2) the 43-layer step at
# 64K, before ("b": commit 80c7d68's indexer.py, carried in scripts/ab) then new, the reverse of call 4's order, so
# that with call 4 the two single runs form B A | A B; (3) the C = 64 step at context 512 with per-kernel attribution
# (where the MoE layer's time goes now, for issue 9's gate / route / combine work).
#   run(command="KB_TOTAL_S=330 KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session30a.sh", carry=[".whl", "scripts/ab"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-330}
source scripts/device_lib.sh || exit 1
[ -f scripts/ab/indexer_before.py ] || { echo "scripts/ab/indexer_before.py missing (carry scripts/ab)"; exit 1; }
IDX="$(installed kernels/indexer.py)"
cp "$IDX" "$W/idx_new.py"
step verify 150 $KB verify csa_indices indexer_topk --impl triton --device cuda --shapes flash-tp8-long --examples 2 \
    --time-budget 6
DB="$KB decode-bench --device cuda --impl triton --graph on --layers flash"
cp scripts/ab/indexer_before.py "$IDX"; step b1 45 $DB --context 65536 --batches 1,16,64 --json "$W/b1.json"
cp "$W/idx_new.py" "$IDX"; step n1 45 $DB --context 65536 --batches 1,16,64 --json "$W/n1.json"
step_times b1 n1
step moe64 60 $DB --context 512 --batches 64 --kernels --json "$W/moe64.json"
rm -f "$W/idx_new.py"
finish
