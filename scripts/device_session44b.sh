#!/usr/bin/env bash
# Session 44 (ran as call 1 at 88cbe77; config ONE was measured slower and removed after it, so the ONE rows reproduce
# only at that commit: at later commits ONE is no config key and --try / the pin refuse it as unknown).
# mhc_post_pre_norm's config ONE at one token (no `_mhc_fin4` launch: the last of the 128 projection
# programs runs the tail; two launches a layer fewer at C = 1), then the checks left from session 43. In order of
# value:
#   1. GPU test (tests/test_mhc.py): ONE against the two launches at the Flash TP8 token, graph replay, tickets;
#   2. the op at T = 1 (graph replay, same inputs): the default, ONE, ONE on 16-column programs (256 of them);
#   3. the 43-layer step at C = 1 (30 interleaved pairs, A/A control first) with each;
#   4. pinned verify of ONE; verify of attention_front's shipped default by name at M = 16 / 64 (session 43);
#   5. on an H200: issue 9's table beside the triton_kernels peer and the copy ceiling (carry .gpu_peers);
#   6. the step's attribution at C = 1 / 16 / 64 (--profile).
#   run(command="KB_TOTAL_S=560 KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session44b.sh",
#       carry=[".whl", ".gpu_peers"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-560}
source scripts/device_lib.sh || exit 1
ONE='{"ONE": true}'
ONE16='{"ONE": true, "BLOCK_D": 16}'
step gpu_test 60 python3 -m pytest -q -m gpu -p no:cacheprovider -rs tests/test_mhc.py -k one_launch
step op 60 $KB bench mhc_post_pre_norm --impl triton --shapes flash-tp8 --batch 1 --max-time 0.5 \
    --try "mhc_post_pre_norm=$ONE" --try "mhc_post_pre_norm=$ONE16" --json "$W/op.json"
step step_one 120 $KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 1 --steps 30 \
    --try "mhc_post_pre_norm@T=1=$ONE" --try "mhc_post_pre_norm@T=1=$ONE16" --json "$W/step_one.json"
P='{"PAIR": "proj4", "BLOCK_T": 1, "BLOCK_D": 32, "num_warps": 4, "SIMT": true, "RELOAD": false, "ONE": true, "BLOCK_MIX": 512, "mix_warps": 4, "norm_warps": 4}'
step verify_one 40 env KERNELBENCH_PIN_CONFIG="mhc_post_pre_norm=$P" $KB verify mhc_post_pre_norm --impl triton \
    --device cuda --shapes flash-tp8 --where T=1 --time-budget 15
step verify_front 50 $KB verify attention_front --impl triton --device cuda --shapes flash-tp8 --where M=16,64 \
    --time-budget 20
if grep -q "H200" "$W/environment.txt"; then
    step copy 30 $KB calibrate --measure copy_gbps
    step issue9 150 $KB bench moe_layer moe_experts --impl triton --impl triton_kernels --shapes flash-tp8 \
        --max-time 0.3 --json "$W/issue9.json"
fi
step profile 120 $KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 1,16,64 --steps 30 \
    --profile --json "$W/profile.json"
step_times step_one profile
finish
