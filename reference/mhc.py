"""Manifold-constrained hyper-connections (mHC, SPEC 3.2, 3.5, 3.7).

Letters: T tokens, D hidden, 4 = hc_mult residual streams, 24 = (2 + 4) * 4 projection width.

The residual is 4 streams h [T, 4, D] bf16. Before each sublayer `mhc_pre` mixes them into the
sublayer input x; after it `mhc_post` writes the sublayer output back into the 4 streams:
    h'[:, j] = post_j * x + sum_i comb[i][j] * h[:, i]
(DeepSeek's `hc_post`: `sum(comb.unsqueeze(-1) * residual.unsqueeze(-2), dim=2)`, i.e. comb is
indexed [source i][destination j]). Every product and sum runs in the compute dtype; x and h' are
rounded to bf16 once, post and comb are fp32 outputs. The DeepSeek code and the SPEC agree here.
"""
from __future__ import annotations

import torch

from kernelbench.reference.precision import acc

HC = 4


def _check_h(name: str, h: torch.Tensor) -> None:
    if h.dim() != 3 or h.shape[1] != HC:
        raise ValueError(f"{name}: h must be [T, {HC}, D], got shape {tuple(h.shape)}")


def _check_proj(name: str, h: torch.Tensor, fn: torch.Tensor, base: torch.Tensor, scale: torch.Tensor,
                rows: int, nscale: int) -> None:
    d4 = HC * h.shape[2]
    if tuple(fn.shape) != (rows, d4):
        raise ValueError(f"{name}: fn must be [{rows}, 4D={d4}], got {tuple(fn.shape)}")
    if tuple(base.shape) != (rows,):
        raise ValueError(f"{name}: base must be [{rows}], got {tuple(base.shape)}")
    if tuple(scale.shape) != (nscale,):
        raise ValueError(f"{name}: scale must be [{nscale}], got {tuple(scale.shape)}")


def mix_logits(h: torch.Tensor, fn: torch.Tensor, norm_eps: float) -> torch.Tensor:
    """m = (flatten(h) @ fn^T) * rsqrt(mean(flatten(h)^2) + norm_eps), in the compute dtype [T, rows].
    DeepSeek normalizes after the projection (one scalar per token), which is what this does."""
    xf = acc(h).flatten(1)
    r = torch.rsqrt(xf.square().mean(dim=-1, keepdim=True) + norm_eps)
    return (xf @ acc(fn).T) * r


def sinkhorn(logits: torch.Tensor, iters: int, eps: float) -> torch.Tensor:
    """[..., 4, 4] -> comb: softmax over each row + eps; divide by (column sums + eps); then
    (iters - 1) times: rows, then columns (DeepSeek `hc_split_sinkhorn`). Near doubly stochastic."""
    if iters < 1:
        raise ValueError(f"sinkhorn: iters must be >= 1, got {iters}")
    c = torch.softmax(logits, dim=-1) + eps
    c = c / (c.sum(dim=-2, keepdim=True) + eps)
    for _ in range(iters - 1):
        c = c / (c.sum(dim=-1, keepdim=True) + eps)
        c = c / (c.sum(dim=-2, keepdim=True) + eps)
    return c


def split_sinkhorn(m: torch.Tensor, base: torch.Tensor, scale: torch.Tensor, iters: int, eps: float):
    """m [T, 24] -> pre [T, 4], post [T, 4], comb [T, 4, 4] (compute dtype)."""
    b, s = acc(base), acc(scale)
    pre = torch.sigmoid(m[:, :HC] * s[0] + b[:HC]) + eps
    post = 2 * torch.sigmoid(m[:, HC:2 * HC] * s[1] + b[HC:2 * HC])
    logits = (m[:, 2 * HC:] * s[2] + b[2 * HC:]).unflatten(-1, (HC, HC))
    return pre, post, sinkhorn(logits, iters, eps)


def _weighted_sum(pre: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
    return (pre[:, :, None] * acc(h)).sum(dim=1).to(h.dtype)


def mhc_pre(h, fn, base, scale, iters: int, eps: float, norm_eps: float):
    """h [T,4,D] bf16, fn [24,4D] fp32, base [24], scale [3] -> x [T,D] bf16, post [T,4] fp32,
    comb [T,4,4] fp32."""
    _check_h("mhc_pre", h)
    _check_proj("mhc_pre", h, fn, base, scale, (2 + HC) * HC, 3)
    pre, post, comb = split_sinkhorn(mix_logits(h, fn, norm_eps), base, scale, iters, eps)
    return _weighted_sum(pre, h), post.to(torch.float32), comb.to(torch.float32)


def sublayer_output(x, x_add=None, name: str = "mhc_post"):
    """The sublayer output as mHC post reads it: x [T,D] bf16 as is; an fp32 x (a TP partial sum after its
    all-reduce, SPEC 4) and / or x_add [T,D] bf16 (the replicated shared expert, which every rank adds after the
    all-reduce) are summed in fp32 and rounded to bf16 once: the unfused decoder's `(x + x_add).to(bfloat16)`."""
    if x.dtype not in (torch.bfloat16, torch.float32):
        raise TypeError(f"{name}: x must be bfloat16 or float32, got {x.dtype}")
    if x_add is not None:
        if x_add.dtype != torch.bfloat16:
            raise TypeError(f"{name}: x_add must be bfloat16, got {x_add.dtype}")
        if x_add.shape != x.shape:
            raise ValueError(f"{name}: x_add must have x's shape {tuple(x.shape)}, got {tuple(x_add.shape)}")
        return (x.float() + x_add.float()).to(torch.bfloat16)
    return x.to(torch.bfloat16)


def mhc_post(x, h, post, comb, x_add=None):
    """x [T,D] bf16 (or fp32, with x_add [T,D] bf16 optional: sublayer_output), h [T,4,D] bf16, post [T,4] fp32,
    comb [T,4,4] fp32 -> h' [T,4,D] bf16."""
    _check_h("mhc_post", h)
    t, _, d = h.shape
    if tuple(x.shape) != (t, d):
        raise ValueError(f"mhc_post: x must be [T, D] = [{t}, {d}], got {tuple(x.shape)}")
    x = sublayer_output(x, x_add)
    if tuple(post.shape) != (t, HC) or tuple(comb.shape) != (t, HC, HC):
        raise ValueError(f"mhc_post: post must be [{t}, 4] and comb [{t}, 4, 4], got "
                         f"{tuple(post.shape)} and {tuple(comb.shape)}")
    y = acc(post)[:, :, None] * acc(x)[:, None, :] + torch.einsum("tij,tid->tjd", acc(comb), acc(h))
    return y.to(h.dtype)


def mhc_post_pre(x, h, post, comb, fn, base, scale, iters: int, eps: float, norm_eps: float, x_add=None):
    """The boundary between two sublayers: h' = mhc_post(x, h, post, comb, x_add), then mhc_pre(h', ...)
    on the bf16 h' (the next pre reads the stored streams). Returns h', x', post', comb'."""
    h2 = mhc_post(x, h, post, comb, x_add)
    return (h2, *mhc_pre(h2, fn, base, scale, iters, eps, norm_eps))


def mhc_post_pre_norm(x, h, post, comb, fn, base, scale, iters: int, eps: float, norm_eps: float, weight,
                      rms_eps: float, x_add=None):
    """mhc_post_pre followed by the next sublayer's RMSNorm (attn_norm / ffn_norm) of its input:
    returns h', rms_norm(x', weight, rms_eps), post', comb'. Composed of the reference ops, so the
    fused kernel is verified against exactly the unfused sequence the decoder runs."""
    from kernelbench.reference.norm import rms_norm   # imported late: a sibling module
    h2, x2, post2, comb2 = mhc_post_pre(x, h, post, comb, fn, base, scale, iters, eps, norm_eps, x_add)
    return h2, rms_norm(x2, weight, rms_eps), post2, comb2


def mhc_head(h, fn, base, scale, eps: float, norm_eps: float):
    """After the last layer: pre = sigmoid(m * scale + base) + eps with fn [4, 4D] (no Sinkhorn),
    x = sum_i pre_i h_i -> x [T, D] bf16."""
    _check_h("mhc_head", h)
    _check_proj("mhc_head", h, fn, base, scale, HC, 1)
    m = mix_logits(h, fn, norm_eps)
    pre = torch.sigmoid(m * acc(scale)[0] + acc(base)) + eps
    return _weighted_sum(pre, h)
