#!/usr/bin/env bash
# For the next card (written in session 42): session 42's what-if again, with the routing confound taken out. Call 3
# (scripts/device_session42c.sh) timed the step with the fused GEMMs' act-quant launches skipped (attention_front,
# attention_q, indexer_q reuse the codes of their first call at each shape): not faster, but the reused codes change
# the activations and so the MoE routing, and with it the MoE's time. Here both runs carry --profile, whose
# attribution splits each layer into the MoE ops' kernels and the rest of the step: the rest is what the fusion of
# the quantization into its producer (mhc_post_pre_norm's output, attention_front's q tail) could shorten. Timing
# only: the what-if's results are wrong and nothing in it is verified. Base, what-if, base again (drift).
#   run(command="KB_TOTAL_S=260 KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session43a.sh", carry=[".whl"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-260}
source scripts/device_lib.sh || exit 1
FRONT="$(installed kernels/front.py)"
cp "$FRONT" "$W/front_base.py"
python3 scripts/whatif_act_quant.py "$FRONT" "$(installed kernels/quant.py)" "$W" || exit 1
S="--device cuda --impl triton --graph on --layers flash --batches 16,64 --steps 30 --profile"
step base 90 $KB decode-bench $S --json "$W/base.json"
cp "$W/front_whatif.py" "$FRONT"
step whatif 60 $KB decode-bench $S --json "$W/whatif.json"
cp "$W/front_base.py" "$FRONT"
step base2 60 $KB decode-bench $S --json "$W/base2.json"
grep -h "per layer, the MoE" "$W/base.log" "$W/whatif.log" "$W/base2.log" | tee -a "$W/status.txt"
step_times base whatif base2
rm -f "$W/front_base.py" "$W/front_whatif.py"
finish
