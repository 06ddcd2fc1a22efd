"""RMSNorm (SPEC 3.3): y = w * x * rsqrt(mean(x^2) + eps), in the compute dtype, cast back to bf16.

Letters: M rows, N the normalized width.
"""
from __future__ import annotations

import torch

from kernelbench.reference.precision import acc


def rms(x: torch.Tensor, eps: float) -> torch.Tensor:
    """x * rsqrt(mean(x^2, last dim) + eps), x already in the compute dtype (no weight, no cast)."""
    return x * torch.rsqrt(x.square().mean(dim=-1, keepdim=True) + eps)


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """x [M, N] bf16 (any leading dims are accepted), weight [N] bf16 -> y [M, N] bf16.

    DeepSeek's RMSNorm normalizes in fp32 and multiplies by the weight before the single cast back,
    which is what this does (no intermediate bf16 rounding of x * rsqrt)."""
    if x.dim() < 1 or weight.dim() != 1 or x.shape[-1] != weight.shape[0]:
        raise ValueError(f"rms_norm: x [..., N] and weight [N] must agree, got {tuple(x.shape)} and "
                         f"{tuple(weight.shape)}")
    if eps < 0:
        raise ValueError(f"rms_norm: eps must be >= 0, got {eps}")
    return (acc(weight) * rms(acc(x), eps)).to(x.dtype)
