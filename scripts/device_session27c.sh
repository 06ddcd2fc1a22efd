#!/usr/bin/env bash
# Session 27, call 3: ROW_REGS "auto" as the default (held-only top-k, one block of the cache's capacity rounded up to
# a power of two, when the cache holds no row past 32768 entries and the one-program top-k runs; else the radix
# passes). (1) the indexer GPU tests; (2) GPU verify replays of csa_indices (one example each): C = 16 and 64 at 64K
# with decode-bench's capacity (16,400 entries: a 32768 block) and ragged lengths, C = 64 at 64K with 16384, C = 64 at
# 8K, C = 1 at 64K (split: radix); (3) the whole step, as shipped against the radix select (--try ROW_REGS 0), at
# 64K tokens C = 16 / 64 and at the issues' context 512 C = 1 / 16 / 64 (the top-k kernel there is now held-only
# with a 1024 block, which never selects: rows <= K); (4) csa_indices alone, default and radix, at 8K / 64K;
# (5) `kernelbench scaling indexer_topk` (no cost may follow the capacity).
#   run(command="KB_TOTAL_S=540 KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session27c.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-540}
source scripts/device_lib.sh || exit 1
step gpu_tests 70 python3 -m pytest -q -rA -p no:cacheprovider -m gpu tests/test_indexer.py
replay() {  # replay NAME T CTX CAP RAGGED
    step "verify_$1" 40 $KB verify csa_indices --impl triton --device cuda --values normal --seed 0 \
        --params "{\"T\": $2, \"Hi\": 64, \"topk\": 512, \"ctx\": $3, \"cap\": $4, \"ragged\": $5, \"W\": 128}"
}
replay c16_64k_cap16400_ragged 16 65536 16400 true
replay c64_64k_cap16400 64 65536 16400 false
replay c64_64k 64 65536 16384 false
replay c64_8k 64 8192 2048 false
replay c1_64k 1 65536 16384 false
R='csa_indices={"ROW_REGS": 0}'
for c in 16 64; do
    step step64k_c$c 100 $KB decode-bench --device cuda --impl triton --graph on --layers flash --batches $c \
        --context 65536 --steps 40 --try "$R" --json "$W/step64k_c$c.json"
done
step step512 110 $KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 1,16,64 \
    --steps 40 --try "$R" --json "$W/step512.json"
step long 70 $KB bench csa_indices --impl triton --impl triton_radix --module scripts/attn_variants.py \
    --shapes flash-tp8-long --max-time 0.2 --batch 1 --batch 16 --batch 64 --context 8192 --context 65536 \
    --json "$W/long.json"
step scaling 70 $KB scaling indexer_topk --impl triton --max-time 0.2 --json "$W/scaling.json"
finish
