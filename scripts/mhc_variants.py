"""Config variants of the mHC kernels of impl "triton_v3" (kernels/mhc.py: `_mhc_proj1` + `_mhc_tail`), registered as
extra impls so that one bench run times them beside "triton_v3" (its default config) and "triton" (the default
kernels): a measurement aid for choosing defaults, not part of the shipped registry.
Load with `kernelbench bench --module scripts/mhc_variants.py`.
"""
from __future__ import annotations

from kernelbench.kernels import mhc as M
from kernelbench.registry import register_impl

OPS = {"mhc_post_pre_norm": M.mhc_post_pre_norm_v3, "mhc_pre": M.mhc_pre_v3}
VARIANTS = {                      # name -> overrides on top of triton_v3's default config of the call's T
    "triton_one": {"ONE": True},                                   # one launch at any T
    "triton_two": {"ONE": False},                                  # two launches at any T
    "triton_tw4": {"ONE": False, "tail_warps": 4},
    "triton_bt32": {"BLOCK_T": 32, "num_warps": 8},
    "triton_bt64": {"BLOCK_T": 64, "num_warps": 8},
    "triton_bt16w8": {"BLOCK_T": 16, "num_warps": 8},
    "triton_mma": {"SIMT": False, "BLOCK_T": 16, "BLOCK_D": 32, "num_warps": 4},   # bf16 MMA projection
    "triton_simt": {"SIMT": True, "BLOCK_T": 1, "BLOCK_D": 32, "num_warps": 4},    # fp32 FMA projection
    "triton_simt4": {"SIMT": True, "BLOCK_T": 4, "BLOCK_D": 32, "num_warps": 4},
}


def _variant(op: str, fn, name: str, overrides: dict):
    def run(config: dict | None = None, **kwargs):
        t, d = kwargs["h"].shape[0], kwargs["h"].shape[2]
        return fn(config={**(config or M.mhc1_default({"T": t, "D": d})), **overrides}, **kwargs)
    run.__name__ = f"{op}_{name}"
    register_impl(op, name, backend="triton", kernels=M._KERNELS1)(run)


for _op, _fn in OPS.items():
    for _name, _over in VARIANTS.items():
        _variant(_op, _fn, _name, _over)


def _one_sinkhorn_iteration(op: str, fn, name: str):
    """A timing diagnostic, not an implementation: the call with iters=1 (comb is then NOT the op's output: the
    bench's recheck reports it), to bound how much of the time Sinkhorn's 20 iterations take."""
    def run(config: dict | None = None, **kwargs):
        return fn(config=config, **{**kwargs, "iters": 1})
    run.__name__ = f"{op}_{name}"
    register_impl(op, name, backend="triton", kernels=M._KERNELS1 if fn is M.mhc_post_pre_norm_v3 else M._KERNELS2)(run)


_one_sinkhorn_iteration("mhc_post_pre_norm", M.mhc_post_pre_norm_v3, "diag_v3_iters1")
_one_sinkhorn_iteration("mhc_post_pre_norm", M.mhc_post_pre_norm, "diag_triton_iters1")
