"""Vocab-parallel embedding lookup (SPEC 3.1).

Letters: T tokens, Vl vocab rows on this rank, D hidden. A rank holds rows [vocab_start,
vocab_start + Vl) of the table; ids outside give zero rows, so the all-reduce (sum) over ranks
is the full lookup.
"""
from __future__ import annotations

import torch


def embedding(ids: torch.Tensor, weight: torch.Tensor, vocab_start: int) -> torch.Tensor:
    """ids [T] int64, weight [Vl, D] bf16 -> x [T, D] bf16 (zero rows for ids off this shard)."""
    if ids.dim() != 1 or ids.dtype not in (torch.int64, torch.int32):
        raise ValueError(f"embedding: ids must be a 1-D int64 tensor, got {tuple(ids.shape)} {ids.dtype}")
    if weight.dim() != 2:
        raise ValueError(f"embedding: weight must be [Vl, D], got {tuple(weight.shape)}")
    if vocab_start < 0:
        raise ValueError(f"embedding: vocab_start must be >= 0, got {vocab_start}")
    local = ids.to(torch.int64) - vocab_start
    inside = (local >= 0) & (local < weight.shape[0])
    rows = weight[local.clamp(0, weight.shape[0] - 1)]
    return torch.where(inside[:, None], rows, torch.zeros_like(rows))
