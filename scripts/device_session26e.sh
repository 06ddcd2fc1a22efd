#!/usr/bin/env bash
# Session 26, call 5 (call 4's verify of the whole long-context set ran past 170 s, and its --try was refused: the
# config check took ROW_REGS 0 for a count that must be positive; fixed). (1) GPU verify replays of csa_indices at the
# long cases the held select changes (one example each, the default config: C = 64 at 64K, C = 1 at 64K (the split's
# held segments), C = 16 at 1M, C = 64 at 8K); (2) the whole Flash step at 64K tokens, the default against the radix
# select (--try 'csa_indices={"ROW_REGS": 0}', interleaved pairs with the A/A control) at C = 16, then C = 64.
#   run(command="KB_TOTAL_S=420 KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session26e.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-420}
source scripts/device_lib.sh || exit 1
replay() {  # replay NAME T CTX CAP
    step "verify_$1" 40 $KB verify csa_indices --impl triton --device cuda --values normal --seed 0 \
        --params "{\"T\": $2, \"Hi\": 64, \"topk\": 512, \"ctx\": $3, \"cap\": $4, \"ragged\": false, \"W\": 128}"
}
replay c64_64k 64 65536 16384
replay c1_64k 1 65536 16384
replay c16_1m 16 1048576 262144
replay c64_8k 64 8192 2048
R='csa_indices={"ROW_REGS": 0}'
for c in 16 64; do
    step step64k_c$c 120 $KB decode-bench --device cuda --impl triton --graph on --layers flash --batches $c \
        --context 65536 --try "$R" --json "$W/step64k_c$c.json"
done
finish
