"""Planted bug: rms_norm that loads its inputs as if they were contiguous (row stride = N, element
stride 1), ignoring the strides it was given. Right for contiguous inputs; for a view into a wider
buffer it reads the padding. A kernel computing `row * N + col` instead of `row * stride + col` does
this; it is race-free and passes every contiguous test."""
import torch

from kernelbench.registry import register_impl


def _as_contiguous_storage(t):
    strides, acc = [], 1
    for size in reversed(t.shape):
        strides.append(acc)
        acc *= size
    return torch.as_strided(t, t.shape, tuple(reversed(strides)))      # BUG: ignores t.stride()


@register_impl("rms_norm", "planted_stride")
def rms_norm(x, weight, eps, config=None):
    xf = _as_contiguous_storage(x).float()
    wf = _as_contiguous_storage(weight).float()
    return (wf * xf * torch.rsqrt(xf.square().mean(-1, keepdim=True) + eps)).to(x.dtype)
