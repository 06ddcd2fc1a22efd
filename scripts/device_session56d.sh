#!/usr/bin/env bash
# Session 56's second call (on an H100; on an H200 scripts/device_session56b.sh runs instead): why impl triton_fp8kv
# is not bit-equal to impl triton on the GPU (call 1: the GPU test failed at one token, verify passed): the row
# decode alone (test_gpu_fp8_rows_come_back_exactly) and the size of the difference per case; csa_indices'
# triton_fp4keys verify with the time its compile needs (call 1 stopped it at 81 s); the decoder's FP4-key GPU test;
# the 43-layer step at 64K tokens with bf16 and FP4 keys (separate runs, bf16 first).
#   run(command="KB_TOTAL_S=560 KERNELBENCH_GIT_COMMIT=<sha> bash scripts/device_session56d.sh", carry=[".whl", ".gpu_peers"])
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL=${KB_TOTAL_S:-560}
source scripts/device_lib.sh || exit 1
step gpu_fp8 60 python3 -m pytest -q -m gpu -p no:cacheprovider -rs tests/test_fp8_kv.py
step fp8_diff 40 python3 - <<'PY'
import torch
from kernelbench import registry
registry.load_builtin()
from kernelbench.kernels import attention as KA
spec, impl = registry.get_op("sparse_attention"), registry.get_impl("sparse_attention", "triton_fp8kv")
for p in [c for c in spec.shape_cases("flash-tp8") if c["ctx"] == 512]:
    inp = spec.make_inputs(p, torch.Generator().manual_seed(p["T"]), "cuda", "normal")
    cfg = impl.default_config(p)
    want, got = KA.sparse_attention(**inp, config=cfg).float(), impl.fn(**impl.prepared(inp), config=cfg).float()
    d = (got - want).abs()
    print(p["T"], p["kind"], "differing", int((d > 0).sum()), "of", d.numel(), "max abs", d.max().item(),
          "max |want|", want.abs().max().item(), "nan", int(got.isnan().sum()), int(want.isnan().sum()))
PY
step verify_csa_fp4 150 $KB verify csa_indices --impl triton_fp4keys --device cuda --shapes flash-tp8 --examples 2
step gpu_keys 150 python3 -m pytest -q -m gpu -p no:cacheprovider -rs tests/test_fp4_keys.py -k decoder
STEP="$KB decode-bench --device cuda --impl triton --graph on --layers flash --batches 1,16 --steps 20 --context 65536"
step keys_bf16 100 $STEP --json "$W/keys_bf16.json"
step keys_fp4 100 env KERNELBENCH_KEY_CACHE=fp4 $STEP --json "$W/keys_fp4.json"
step_times keys_bf16 keys_fp4
finish
