"""Config variants of the v2 linear kernels (kernels/linear.py, impl "triton"), registered as extra impls so
that one bench run times them beside "triton" (its default config), "triton_v1" and cuBLAS: a measurement aid for
choosing the defaults, not part of the shipped registry. Each variant is the v2 default with a few keys replaced
(NB clamped to divide the K blocks of a split). Load with `kernelbench bench --module scripts/linear_variants.py`.
"""
from __future__ import annotations

from kernelbench.kernels import linear as L
from kernelbench.registry import register_impl


def _fit_nb(cfg: dict, kblocks: int) -> dict:
    per_split = kblocks // L._fit_split(cfg["SPLIT"], kblocks)
    nb = cfg.get("NB", 1)
    while per_split % nb:
        nb //= 2
    return {**cfg, "NB": nb}


def _fp8(name: str, overrides: dict, per_sm: int = L.V2_PROGRAMS_PER_SM):
    def run(x, weight, weight_scale, config=None):
        M, (N, K) = x.shape[0], weight.shape
        cfg = {**L.fp8_v2_default({"M": M, "N": N, "K": K}, per_sm), **overrides}
        if cfg["BM"] != 1 and M <= L.GEMV_MAX_M and "BM" not in overrides:
            cfg["BM"] = 1
        return L.fp8_linear(x, weight, weight_scale, config=config or _fit_nb(cfg, K // 128))
    run.__name__ = f"fp8_linear_{name}"
    register_impl("fp8_linear", name, backend="triton", kernels=lambda: [L._fp8_linear_v2_kernel])(run)


def _woa(name: str, overrides: dict, per_sm: int = L.V2_PROGRAMS_PER_SM):
    def run(o, weight, config=None):
        T, G, I = o.shape
        cfg = {**L.bf16_v2_default({"T": T, "Gl": G, "O": weight.shape[1], "I": I}, per_sm), **overrides}
        return L.grouped_wo_a(o, weight, config=config or _fit_nb(cfg, -(-I // 128)))
    run.__name__ = f"grouped_wo_a_{name}"
    register_impl("grouped_wo_a", name, backend="triton", kernels=lambda: [L._bf16_gemm_kernel])(run)


_fp8("v2_w8", {"num_warps": 8})
_fp8("v2_bn32", {"BN": 32})
_fp8("v2_bn128", {"BN": 128, "num_warps": 8})
_fp8("v2_nb1", {"NB": 1})
_fp8("v2_nb8", {"NB": 8})
_fp8("v2_pps1", {}, per_sm=1)
_fp8("v2_pps4", {}, per_sm=4)
_fp8("v2_w4", {"num_warps": 4})
_fp8("v2_mma16", {"BM": 16, "X_OPERAND": "B"})        # M = 1 on tensor cores (x as the B operand, 16 padded rows)
_fp8("v2_xa", {"X_OPERAND": "A"})                     # M > 1: x as the A operand (fp16 upcast on sm_90 below BM 64)
_fp8("v2_xb", {"X_OPERAND": "B"})
_fp8("v2_bn128w4", {"BN": 128, "num_warps": 4})
_woa("v2_w8", {"num_warps": 8})
_woa("v2_nb4", {"NB": 4})
_woa("v2_nb1", {"NB": 1})
_woa("v2_pps4", {}, per_sm=4)
_woa("v2_bn32", {"BN": 32})
