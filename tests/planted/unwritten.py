"""Planted bug: rms_norm computed in column blocks of 64 whose loop bound drops the tail block
(`range(0, N - 63, 64)`): for N not a multiple of 64 the last columns of the output are never
written. The output comes from torch.empty, so they hold whatever was there (verify poisons it)."""
import torch

from kernelbench.registry import register_impl

BLOCK = 64


@register_impl("rms_norm", "planted_tail")
def rms_norm(x, weight, eps, config=None):
    xf = x.float()
    r = torch.rsqrt(xf.square().mean(-1, keepdim=True) + eps)
    y = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    for start in range(0, x.shape[-1] - BLOCK + 1, BLOCK):              # BUG: the tail block is skipped
        cols = slice(start, start + BLOCK)
        y[..., cols] = (weight[cols].float() * xf[..., cols] * r).to(x.dtype)
    return y
