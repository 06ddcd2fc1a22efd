"""Token sampling (SPEC 3.8): greedy where temperature == 0, else Gumbel-max with given noise.

Letters: T tokens, V vocab (all-gathered logits). With noise ~ Exp(1), argmax(p / noise) for
p = softmax(logits / t) draws a token with probability p (the exponential race). The noise is an
input, so the op is deterministic and a kernel can be compared with the reference exactly. Ties go
to the lowest index (torch.argmax).
"""
from __future__ import annotations

import torch

from kernelbench.reference.precision import acc


def sample(logits: torch.Tensor, temperature: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
    """logits [T, V] fp32, temperature [T] fp32 (>= 0), noise [T, V] fp32 (> 0) -> ids [T] int64."""
    if logits.dim() != 2:
        raise ValueError(f"sample: logits must be [T, V], got {tuple(logits.shape)}")
    if tuple(temperature.shape) != (logits.shape[0],):
        raise ValueError(f"sample: temperature must be [{logits.shape[0]}], got {tuple(temperature.shape)}")
    if tuple(noise.shape) != tuple(logits.shape):
        raise ValueError(f"sample: noise must have the logits' shape {tuple(logits.shape)}, got {tuple(noise.shape)}")
    lg, t = acc(logits), acc(temperature)[:, None]
    greedy = t == 0
    probs = torch.softmax(lg / torch.where(greedy, torch.ones_like(t), t), dim=-1)
    score = torch.where(greedy, lg, probs / acc(noise))
    return score.argmax(dim=-1)
