#!/usr/bin/env bash
# Session 42, call 3: what removing the activation-quantization launches would give the step (a ceiling measured
# before building the fusion). At 16 / 64 tokens attention_front, attention_q and indexer_q quantize x in a launch of
# their own (_fp8_quant_kernel: 4.6-5.5 us a layer for attention_front's in session 38's H100 attribution, 1.9-2.0 for
# attention_q's, 3.1 for indexer_q's at 64). WHAT-IF variants of the installed package (timing only; the GEMMs then
# read the codes of the first call at that shape, so their results are wrong and nothing here is verified):
#   front: kernels/front.py _gemm_activation (attention_front, attention_q, indexer_q) quantizes once per shape and
#          then reuses the codes (no launch);
#   all:   every act_quant_fp8 launch through kernels/quant.py _launch_fp8 does so.
# The step at C = 16 / 64 as shipped, front, all, as shipped again (drift check), each its own decode-bench run.
#   run(command="KB_TOTAL_S=200 KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session42c.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-200}
source scripts/device_lib.sh || exit 1
FRONT="$(installed kernels/front.py)"; QUANT="$(installed kernels/quant.py)"
cp "$FRONT" "$W/front_base.py"; cp "$QUANT" "$W/quant_base.py"
python3 scripts/whatif_act_quant.py "$FRONT" "$QUANT" "$W" || exit 1
S="--device cuda --impl triton --graph on --layers flash --batches 16,64 --steps 30"
step base 60 $KB decode-bench $S --json "$W/base.json"
cp "$W/front_whatif.py" "$FRONT"
step front 60 $KB decode-bench $S --json "$W/front.json"
cp "$W/front_base.py" "$FRONT"; cp "$W/quant_whatif.py" "$QUANT"
step all 60 $KB decode-bench $S --json "$W/all.json"
cp "$W/quant_base.py" "$QUANT"
step base2 60 $KB decode-bench $S --json "$W/base2.json"
step_times base front all base2
finish
