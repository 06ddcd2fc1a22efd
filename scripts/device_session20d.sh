#!/usr/bin/env bash
# Session 20, call 4 (the session's last): sparse attention's combine as the join of every split at once (commit
# fc1daee, kernels/attention.py _attn_combine -> _attn_join) against the previous loop over the splits ("b": carried
# untracked as scripts/ab/attention_before.py): verify of the changed ops (sparse_attention; hadamard,
# whose default is now the butterfly), the combine's Nsight Compute duration at T = 1, the 43-layer step A B A B.
#   run(command="KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session20d.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-420}
source scripts/device_lib.sh || exit 1
ATT="$(installed kernels/attention.py)"
cp "$ATT" "$W/att_new.py"
step verify 80 $KB verify sparse_attention hadamard --impl triton --device cuda --shapes flash-tp8 --examples 2 \
    --time-budget 6
DB="$KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 1,16,64"
for r in 1 2; do
    cp "$W/att_new.py" "$ATT"; step n$r $(( r == 1 ? 90 : 40 )) $DB --json "$W/n$r.json"
    cp scripts/ab/attention_before.py "$ATT"; step b$r $(( r == 1 ? 60 : 40 )) $DB --json "$W/b$r.json"
done
step_times n1 b1 n2 b2
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
SOL="$NCU --profile-from-start off --clock-control none -k regex:_attn_ --section SpeedOfLight --csv --page details"
ATTN="python3 scripts/profile_op.py sparse_attention --batch 1 --batch 64 --where ctx=512"
step sol_b 30 $SOL $ATTN
cp "$W/att_new.py" "$ATT"; step sol_n 30 $SOL $ATTN
for f in sol_b sol_n; do echo "== $f"; python3 scripts/ncu_summary.py "$W/$f.log"; done > "$W/sol_summary.txt" 2>&1
rm -f "$W/att_new.py"
finish
