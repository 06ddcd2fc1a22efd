"""Config variants of the mHC kernels of impls "triton_v3" (`_mhc_proj1` + `_mhc_tail`) and "triton" (`_mhc_proj4` +
`_mhc_fin4`) in kernels/mhc.py, registered as
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


def _variant(op: str, fn, name: str, overrides: dict, default, kernels):
    """Register `name` for `op`: `fn` with `overrides` on top of the call's config (else `default` at its T, D)."""
    def run(config: dict | None = None, **kwargs):
        t, d = kwargs["h"].shape[0], kwargs["h"].shape[2]
        return fn(config={**(config or default({"T": t, "D": d})), **overrides}, **kwargs)
    run.__name__ = f"{op}_{name}"
    register_impl(op, name, backend="triton", kernels=kernels)(run)


for _op, _fn in OPS.items():
    for _name, _over in VARIANTS.items():
        _variant(_op, _fn, _name, _over, M.mhc1_default, M._KERNELS1)


def _one_sinkhorn_iteration(op: str, fn, name: str):
    """A timing diagnostic, not an implementation: the call with iters=1 (comb is then NOT the op's output: the
    bench's recheck reports it), to bound how much of the time Sinkhorn's 20 iterations take."""
    def run(config: dict | None = None, **kwargs):
        return fn(config=config, **{**kwargs, "iters": 1})
    run.__name__ = f"{op}_{name}"
    register_impl(op, name, backend="triton", kernels=M._KERNELS1 if fn is M.mhc_post_pre_norm_v3 else M._KERNELS2)(run)


_one_sinkhorn_iteration("mhc_post_pre_norm", M.mhc_post_pre_norm_v3, "diag_v3_iters1")
_one_sinkhorn_iteration("mhc_post_pre_norm", M.mhc_post_pre_norm, "diag_v2_iters1")


# impl "triton" (`_mhc_proj4` + `_mhc_fin4`; "triton_v4" for mhc_head): overrides on top of its default config of the
# call's T (an explicit config: the new kernels at any T)
V4 = {"mhc_post_pre_norm": M.mhc_post_pre_norm_v4, "mhc_pre": M.mhc_pre_v4}
V4_VARIANTS = {
    "v4_pure": {},        # the new kernels at every T (impl triton runs triton_v2's at 4 < T <= 16)
    "v4_p1x16": {"SIMT": True, "BLOCK_T": 1, "BLOCK_D": 16, "num_warps": 2},      # 256 projection programs at T=1
    "v4_mix256": {"BLOCK_MIX": 256, "mix_warps": 2},        # x column blocks (ops without the fused norm)
    "v4_mix1024": {"BLOCK_MIX": 1024, "mix_warps": 4},
    "v4_nw4": {"norm_warps": 4},                             # the norm's row program (mhc_post_pre_norm)
    "v4_nw16": {"norm_warps": 16},
    "v4_mma16w8": {"SIMT": False, "BLOCK_T": 16, "BLOCK_D": 32, "num_warps": 8, "RELOAD": True},
    "v4_noreload": {"SIMT": False, "BLOCK_T": 16, "BLOCK_D": 32, "num_warps": 4, "RELOAD": False},  # post in registers
    "v4_simt8": {"SIMT": True, "BLOCK_T": 8, "BLOCK_D": 16, "num_warps": 4},
    "v4_simt8w8": {"SIMT": True, "BLOCK_T": 8, "BLOCK_D": 32, "num_warps": 8},
    "v4_simt4": {"SIMT": True, "BLOCK_T": 4, "BLOCK_D": 32, "num_warps": 4},
    "v4_simt16": {"SIMT": True, "BLOCK_T": 16, "BLOCK_D": 16, "num_warps": 4},
}


for _op, _fn in V4.items():
    for _name, _over in V4_VARIANTS.items():
        _variant(_op, _fn, _name, _over, M.mhc4_default, M._KERNELS4)


def _v4_iters1(config: dict | None = None, **kwargs):
    """Timing diagnostic (comb is not the op's output): impl triton's new kernels with one Sinkhorn iteration."""
    return M.mhc_post_pre_norm_v4(config=config, **{**kwargs, "iters": 1})


register_impl("mhc_post_pre_norm", "diag_v4_iters1", backend="triton", kernels=M._KERNELS4)(_v4_iters1)
