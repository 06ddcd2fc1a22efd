"""The attention front of a decode step as one op (SPEC 3.4 and 3.6): the two projections of the layer input
x that every attention layer starts with, each with its elementwise tail.

    attention_front: qr = rms_norm(fp8_linear(x, wq_a), q_norm); kv' = kv_write(fp8_linear(x, wkv), kv_norm, ...)
    attention_q:     q = head_rms_norm_rope(fp8_linear(qr, wq_b) as [T, Hl, Dh], positions, freqs)

The reference is the composition of the ops' own references (no new arithmetic): a fused kernel must give what
the separate ops give, bf16 roundings of the projections included.
"""
from __future__ import annotations

import torch

from kernelbench.reference.kv import kv_write
from kernelbench.reference.linear import fp8_linear
from kernelbench.reference.norm import rms_norm
from kernelbench.reference.rope import head_rms_norm_rope


def attention_front(x: torch.Tensor, wq_a: torch.Tensor, wq_a_scale: torch.Tensor, q_norm: torch.Tensor,
                    wkv: torch.Tensor, wkv_scale: torch.Tensor, kv_norm: torch.Tensor, eps: float,
                    positions: torch.Tensor, seq_ids: torch.Tensor, freqs: torch.Tensor,
                    window_cache: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """x [T, D] bf16 -> qr [T, Qr] bf16 (the normed q low-rank input), kv' [T, Dh] bf16 (also written to
    window_cache[seq, p % W], as kv_write)."""
    qr = rms_norm(fp8_linear(x, wq_a, wq_a_scale), q_norm, eps)
    kv = kv_write(fp8_linear(x, wkv, wkv_scale), kv_norm, eps, positions, seq_ids, freqs, window_cache)
    return qr, kv


def attention_q(x: torch.Tensor, weight: torch.Tensor, weight_scale: torch.Tensor, head_dim: int,
                positions: torch.Tensor, freqs: torch.Tensor, eps: float) -> torch.Tensor:
    """x = qr [T, Qr] bf16 -> q [T, Hl, Dh] bf16: the wq_b projection viewed as heads of head_dim, then
    head_rms_norm_rope (per-head weightless RMS, RoPE on the last R dims)."""
    y = fp8_linear(x, weight, weight_scale)
    if head_dim <= 0 or y.shape[1] % head_dim:
        raise ValueError(f"attention_q: head_dim {head_dim} must divide the {y.shape[1]} outputs of weight")
    return head_rms_norm_rope(y.view(x.shape[0], -1, head_dim), positions, freqs, eps)
