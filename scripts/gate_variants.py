"""Config variants of the MoE layer at decode batches, registered as extra impls so that one bench run times them beside
impl "triton" (the default config) on the same inputs: a measurement aid for choosing defaults, not part of the
shipped registry. Load with `kernelbench bench moe_gate moe_layer moe_routed --module scripts/gate_variants.py`.

The gate (moe_gate and moe_layer):
    triton_gw8     GATE_WARPS 8 (the one-launch gate's programs at 8 warps; 1 and 2 were slower, session 11)
    triton_rows    GATE_ROWS "routed" (hash layers score only the routed experts' gate rows; session 33; the default
                   since session 34)
    triton_allrows GATE_ROWS "all" (every gate row in hash layers too: the default before session 34)
The routed experts' weights beside the gate (moe_layer and moe_routed; session 34):
    triton_pfN     PREFETCH_EXPERTS N (local experts 0 .. N-1's W1 / W3 bulk-prefetched into L2 while the gate runs)
"""
from __future__ import annotations

from kernelbench.kernels import moe as M
from kernelbench.registry import register_impl
from kernelbench.tuned_configs import lookup

GATE_VARIANTS = {"triton_gw8": {"GATE_WARPS": 8}, "triton_rows": {"GATE_ROWS": "routed"},
                 "triton_allrows": {"GATE_ROWS": "all"}}
PREFETCH_VARIANTS = {f"triton_pf{n}": {"PREFETCH_EXPERTS": n} for n in (2, 3, 4, 6)}


def _gate_variant(name: str, overrides: dict) -> None:
    def run(x, weight, bias, tid2eid, token_ids, topk, route_scale, config=None):
        cfg = {**(config or M.gate_default({"T": x.shape[0]})), **overrides}
        return M.moe_gate(x, weight, bias, tid2eid, token_ids, topk, route_scale, config=cfg)
    run.__name__ = f"moe_gate_{name}"
    register_impl("moe_gate", name, backend="triton", kernels=lambda: [M._gate_fused_kernel])(run)


def _layer_variant(op: str, name: str, overrides: dict) -> None:
    def fixed(params: dict) -> dict:      # the config impl "triton" runs (the op's lookup chain), then overrides
        key = {k: params[k] for k in ("T", "D", "El", "F", "K", "kernel")}
        return {**lookup(op, key, lookup("moe_experts", key, M.grouped_default(params))), **overrides}

    def run(x, weight, bias, tid2eid, token_ids, topk, route_scale, w1, s1, w3, s3, w2, s2, expert_offset,
            swiglu_limit, shared_w1=None, shared_s1=None, shared_w3=None, shared_s3=None, shared_w2=None,
            shared_s2=None, config=None):
        return M._layer_grouped(fixed, x, weight, bias, tid2eid, token_ids, topk, route_scale, w1, s1, w3, s3, w2,
                                s2, expert_offset, swiglu_limit, shared_w1, shared_s1, shared_w3, shared_s3,
                                shared_w2, shared_s2, config, op=op)
    run.__name__ = f"{op}_{name}"
    register_impl(op, name, backend="triton", deterministic=True, prepare=M.prepare_experts,
                  kernels=lambda: [M._gate_fused_kernel, M._prefetch_spans_kernel, *M._GROUPED_KERNELS])(run)


for _name, _over in GATE_VARIANTS.items():
    _gate_variant(_name, _over)
    _layer_variant("moe_layer", _name, _over)
for _name, _over in PREFETCH_VARIANTS.items():
    for _op in ("moe_layer", "moe_routed"):
        _layer_variant(_op, _name, _over)
