"""Config variants of the issue-17 latency kernels, registered as extra impls so that one bench run times them
beside impl "triton" (the default config) and "triton_v1" (the first version): a measurement aid for choosing
defaults, not part of the shipped registry. Load with `kernelbench bench --module scripts/latency_variants.py`.
"""
from __future__ import annotations

from kernelbench.kernels import compressor as C
from kernelbench.kernels import front as F
from kernelbench.kernels import indexer as I
from kernelbench.kernels import mhc as M
from kernelbench.registry import register_impl


def _variant(op: str, name: str, fn, default, overrides: dict, kernels):
    """default(inputs as keyword arguments) -> the config impl "triton" would run; the overrides go on top."""
    def run(config: dict | None = None, **kwargs):
        return fn(config={**(config or default(kwargs)), **overrides}, **kwargs)
    run.__name__ = f"{op}_{name}"
    register_impl(op, name, backend="triton", kernels=kernels)(run)


def _norm_default(kw):
    return M.mhc_norm_default({"T": kw["h"].shape[0], "D": kw["h"].shape[2]})


_variant("mhc_post_pre_norm", "triton_nj1", M.mhc_post_pre_norm, _norm_default, {"NJ": 1},
         lambda: [M._mhc_proj, M._mhc_mix])
_variant("mhc_post_pre_norm", "triton_mix1", M.mhc_post_pre_norm, _norm_default, {"mix_warps": 1},
         lambda: [M._mhc_proj, M._mhc_mix])
_variant("compressor_step", "triton_w4", C.compressor_step, lambda kw: C.step_default({}), {"waves": 4},
         lambda: [C._comp_step])
_variant("indexer_topk", "triton_seg16", I.indexer_topk, lambda kw: I.indexer_default({}), {"SEGMENTS": 16},
         lambda: [I._index_scores, I._index_topk_split])
_variant("indexer_topk", "triton_tw4", I.indexer_topk, lambda kw: I.indexer_default({}), {"TOPK_WARPS": 4},
         lambda: [I._index_scores, I._index_topk])
_variant("compressor_step", "triton_r16", C.compressor_step, lambda kw: C.step_default({}), {"ROWS": 16},
         lambda: [C._comp_step])
_variant("compressor_step", "triton_bn32", C.compressor_step, lambda kw: C.step_default({}), {"BLOCK_N": 32},
         lambda: [C._comp_step])
_variant("compressor_step", "triton_waves1", C.compressor_step, lambda kw: C.step_default({}), {"waves": 1},
         lambda: [C._comp_step])
_variant("compressor_step", "triton_emit1", C.compressor_step, lambda kw: C.step_default({}), {"EMIT_MAX_T": 1 << 20},
         lambda: [C._comp_step])
_variant("compressor_step", "triton_bn32w4", C.compressor_step, lambda kw: C.step_default({}),
         {"BLOCK_N": 32, "waves": 4}, lambda: [C._comp_step])


def _iq_default(kw):
    return I.indexer_q_default({"T": kw["qr"].shape[0], "Hi": kw["weight"].shape[0] // 128, "Qr": kw["qr"].shape[1]})


_variant("indexer_q", "triton_w4", I.indexer_q, _iq_default, {"num_warps": 4}, lambda: [I._indexer_q_kernel])
_variant("indexer_q", "triton_bn32", I.indexer_q, _iq_default, {"BN": 32}, lambda: [I._indexer_q_kernel])
_variant("mhc_post_pre_norm", "triton_bt16", M.mhc_post_pre_norm, _norm_default, {"BLOCK_T": 16, "num_warps": 4},
         lambda: [M._mhc_proj, M._mhc_mix])


# session 28: one ticket stage instead of two in the GEMMs with a per-head epilogue (config SPLIT_SUM "head",
# kernels/linear.py fp8_tile_head_ticket), on the config the step runs (the tuned entry, else the default)
def _aq_config(kw):
    from kernelbench.kernels.front import attention_q_default
    from kernelbench.tuned_configs import lookup
    key = {"M": kw["x"].shape[0], "N": kw["weight"].shape[0], "K": kw["x"].shape[1]}
    return lookup("attention_q", key, attention_q_default(key))


def _iq_gemv(kw):      # the fused one-token GEMV that won in the step in session 23 (NB 1, widest split, 4 warps)
    base = _iq_default(kw)
    return {**base, "PATH": "fused", "NB": 1, "SPLIT": kw["qr"].shape[1] // 128, "num_warps": 4}


def _head_sum(config_of):
    """SPLIT_SUM "head" on config_of's config where it is the one-token GEMV tile (BM 1), which alone takes it; other
    cases run config_of's config as is (session 29 call 2: pinning it at every M made verify fail by refusal)."""
    def config(kw):
        cfg = config_of(kw)
        return {**cfg, "SPLIT_SUM": "head"} if cfg.get("BM") == 1 else cfg
    return config


_variant("attention_q", "triton_headsum", F.attention_q, _head_sum(_aq_config), {}, lambda: [F._attention_q_kernel])
_variant("indexer_q", "triton_gemv", I.indexer_q, _iq_gemv, {}, lambda: [I._indexer_q_kernel])
_variant("indexer_q", "triton_gemv_headsum", I.indexer_q, _head_sum(_iq_gemv), {}, lambda: [I._indexer_q_kernel])
