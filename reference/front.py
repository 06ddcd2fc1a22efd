"""The attention front of a decode step as one op (SPEC 3.4 and 3.6): the two projections of the layer input
x that every attention layer starts with, each with its elementwise tail.

    attention_front: qr = rms_norm(fp8_linear(x, wq_a), q_norm); kv' = kv_write(fp8_linear(x, wkv), kv_norm, ...)

The reference is the composition of the ops' own references (no new arithmetic): a fused kernel must give what
the separate ops give, bf16 roundings of the projections included.
"""
from __future__ import annotations

import torch

from kernelbench.reference.kv import kv_write
from kernelbench.reference.linear import fp8_linear
from kernelbench.reference.norm import rms_norm


def attention_front(x: torch.Tensor, wq_a: torch.Tensor, wq_a_scale: torch.Tensor, q_norm: torch.Tensor,
                    wkv: torch.Tensor, wkv_scale: torch.Tensor, kv_norm: torch.Tensor, eps: float,
                    positions: torch.Tensor, seq_ids: torch.Tensor, freqs: torch.Tensor,
                    window_cache: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """x [T, D] bf16 -> qr [T, Qr] bf16 (the normed q low-rank input), kv' [T, Dh] bf16 (also written to
    window_cache[seq, p % W], as kv_write)."""
    qr = rms_norm(fp8_linear(x, wq_a, wq_a_scale), q_norm, eps)
    kv = kv_write(fp8_linear(x, wkv, wkv_scale), kv_norm, eps, positions, seq_ids, freqs, window_cache)
    return qr, kv
