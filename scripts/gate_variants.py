"""Config variants of the MoE gate at decode batches, registered as extra impls so that one bench run times them beside
impl "triton" (the default config) on the same inputs: a measurement aid for choosing defaults, not part of the
shipped registry. Load with `kernelbench bench moe_gate moe_layer --module scripts/gate_variants.py`.

    triton_gw8     GATE_WARPS 8 (the one-launch gate's programs at 8 warps; 1 and 2 were slower, session 11)
    triton_rows    GATE_ROWS "routed" (hash layers score only the routed experts' gate rows; session 33; the default
                   since session 34)
    triton_allrows GATE_ROWS "all" (every gate row in hash layers too: the default before session 34)
"""
from __future__ import annotations

from kernelbench.kernels import moe as M
from kernelbench.registry import register_impl

VARIANTS = {"triton_gw8": {"GATE_WARPS": 8}, "triton_rows": {"GATE_ROWS": "routed"},
            "triton_allrows": {"GATE_ROWS": "all"}}


def _gate_variant(name: str, overrides: dict) -> None:
    def run(x, weight, bias, tid2eid, token_ids, topk, route_scale, config=None):
        cfg = {**(config or M.gate_default({"T": x.shape[0]})), **overrides}
        return M.moe_gate(x, weight, bias, tid2eid, token_ids, topk, route_scale, config=cfg)
    run.__name__ = f"moe_gate_{name}"
    register_impl("moe_gate", name, backend="triton", kernels=lambda: [M._gate_fused_kernel])(run)


def _layer_variant(name: str, overrides: dict) -> None:
    def fixed(params: dict) -> dict:      # the config impl "triton" runs, then overrides
        return {**M.layer_config("moe_layer", params), **overrides}

    def run(x, weight, bias, tid2eid, token_ids, topk, route_scale, w1, s1, w3, s3, w2, s2, expert_offset,
            swiglu_limit, shared_w1, shared_s1, shared_w3, shared_s3, shared_w2, shared_s2, config=None):
        return M._layer_grouped(fixed, x, weight, bias, tid2eid, token_ids, topk, route_scale, w1, s1, w3, s3, w2,
                                s2, expert_offset, swiglu_limit, shared_w1, shared_s1, shared_w3, shared_s3,
                                shared_w2, shared_s2, config)
    run.__name__ = f"moe_layer_{name}"
    register_impl("moe_layer", name, backend="triton", deterministic=True, prepare=M.prepare_experts,
                  kernels=lambda: [M._gate_fused_kernel, *M._GROUPED_KERNELS])(run)


for _name, _over in VARIANTS.items():
    _gate_variant(_name, _over)
    _layer_variant(_name, _over)
