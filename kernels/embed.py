"""Vocab-parallel embedding lookup.

Legend: T tokens, Vl rows on this rank, D hidden. Grid (T, ceil(D / BLOCK_D)): each program copies
BLOCK_D columns of its token's row, or writes zeros when the id is off this shard (the masked load
reads nothing then). One read of each needed row, one write of x.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernelbench.kernels.common import check_device, check_dtype
from kernelbench.registry import register_impl
from kernelbench.tuned_configs import lookup


def embedding_configs(params: dict) -> list[dict]:
    return [{"BLOCK_D": bd, "num_warps": w} for bd in (256, 512, 1024, 2048, 4096) for w in (1, 2, 4, 8)]


def embedding_default(params: dict) -> dict:
    return {"BLOCK_D": 1024, "num_warps": 4}


@triton.jit
def _embedding_kernel(ids_ptr, w_ptr, x_ptr,   # ids (T,) int64; w (Vl, D) bf16 row-major; x (T, D) bf16
                      VL, D, vocab_start, BLOCK_D: tl.constexpr):
    t = tl.program_id(0)
    d = tl.program_id(1) * BLOCK_D + tl.arange(0, BLOCK_D)
    local = tl.load(ids_ptr + t).to(tl.int64) - vocab_start
    inside = (local >= 0) & (local < VL)
    row = tl.where(inside, local, 0)
    # Off the shard no column is in bounds. One comparison, not `(d < D) & inside`: Triton 3.9's
    # interpreter broadcasts a scalar bool to an int array there and refuses it as a mask.
    d_end = tl.where(inside, D, 0)
    v = tl.load(w_ptr + row * D + d, mask=d < d_end, other=0.0)
    tl.store(x_ptr + t.to(tl.int64) * D + d, v, mask=d < D)


@register_impl("embedding", "triton", backend="triton", configs=embedding_configs, default_config=embedding_default,
               kernels=lambda: [_embedding_kernel])
def embedding(ids: torch.Tensor, weight: torch.Tensor, vocab_start: int, config: dict | None = None) -> torch.Tensor:
    check_device(ids, weight)
    check_dtype("ids", ids, torch.int64, torch.int32)
    if ids.dim() != 1:
        raise ValueError(f"embedding: ids must be 1-D [T], got shape {tuple(ids.shape)}")
    if weight.dim() != 2:
        raise ValueError(f"embedding: weight must be [Vl, D], got shape {tuple(weight.shape)}")
    if vocab_start < 0:
        raise ValueError(f"embedding: vocab_start must be >= 0, got {vocab_start}")
    t, (vl, d) = ids.shape[0], weight.shape
    w = weight.contiguous()
    x = torch.empty((t, d), dtype=weight.dtype, device=weight.device)
    key = {"T": t, "D": d}
    cfg = config or lookup("embedding", key, embedding_default(key))
    if t and d:
        _embedding_kernel[(t, triton.cdiv(d, cfg["BLOCK_D"]))](
            ids.contiguous(), w, x, vl, d, int(vocab_start), BLOCK_D=cfg["BLOCK_D"], num_warps=cfg["num_warps"])
    return x
