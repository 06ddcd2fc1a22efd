"""The sliding-window KV write and the per-token list of attended cache entries (SPEC 3.4).

Letters: T tokens (one per sequence at decode), B sequences, W window (128), Dh head dim (512),
R rope dims (64), K indexer top-k, r compress ratio, Ncap compressed-cache capacity.

Per-sequence attention cache of one layer (docs/OPS.md): kv[B, W + Ncap, Dh], ring slots [0, W)
then compressed entry i at W + i. `attention_indices` emits indices into that per-sequence cache.
"""
from __future__ import annotations

import torch

from kernelbench.reference.norm import rms_norm
from kernelbench.reference.quant import fp8_simulate
from kernelbench.reference.rope import rope

KINDS = ("swa", "csa", "hca")


def _check_tokens(name: str, positions: torch.Tensor, seq_ids: torch.Tensor | None, t: int, b: int | None) -> None:
    if positions.dim() != 1 or positions.shape[0] != t:
        raise ValueError(f"{name}: positions must be [T={t}], got {tuple(positions.shape)}")
    if positions.dtype.is_floating_point or positions.dtype == torch.bool:
        raise TypeError(f"{name}: positions must be integers, got {positions.dtype}")
    if t and int(positions.min()) < 0:
        raise ValueError(f"{name}: positions must be >= 0")
    if seq_ids is None:
        return
    if seq_ids.dim() != 1 or seq_ids.shape[0] != t:
        raise ValueError(f"{name}: seq_ids must be [T={t}], got {tuple(seq_ids.shape)}")
    if seq_ids.dtype.is_floating_point or seq_ids.dtype == torch.bool:
        raise TypeError(f"{name}: seq_ids must be integers, got {seq_ids.dtype}")
    if t and (int(seq_ids.min()) < 0 or int(seq_ids.max()) >= b):
        raise ValueError(f"{name}: seq_ids must lie in [0, B={b}), got range "
                         f"[{int(seq_ids.min())}, {int(seq_ids.max())}]")
    if t and torch.unique(seq_ids).numel() != t:
        raise ValueError(f"{name}: a decode step holds one token per sequence; seq_ids has duplicates")


def kv_write(kv: torch.Tensor, weight: torch.Tensor, eps: float, positions: torch.Tensor, seq_ids: torch.Tensor,
             freqs: torch.Tensor, window_cache: torch.Tensor) -> torch.Tensor:
    """kv [T, Dh] bf16 -> kv' [T, Dh] bf16 = fp8sim(norm(kv)[:Dh-R]) ++ rope(norm(kv)[Dh-R:], p);
    also written in place to window_cache[seq, p % W] ([B, W, Dh] bf16).

    As DeepSeek's model.py: kv_norm (bf16 out), RoPE on the bf16 normed rope dims (bf16 out), then the
    in-place FP8 simulation (group 64, UE8M0) of the first Dh-R dims."""
    if kv.dim() != 2 or window_cache.dim() != 3 or kv.shape[1] != window_cache.shape[2]:
        raise ValueError(f"kv_write: kv [T, Dh] and window_cache [B, W, Dh] must agree, got {tuple(kv.shape)} "
                         f"and {tuple(window_cache.shape)}")
    if kv.dtype != torch.bfloat16 or window_cache.dtype != torch.bfloat16:
        raise TypeError(f"kv_write: kv and window_cache must be bf16, got {kv.dtype}, {window_cache.dtype}")
    t, dh = kv.shape
    r = 2 * freqs.shape[0]
    if not 0 < r < dh or (dh - r) % 64:
        raise ValueError(f"kv_write: R={r} rope dims must leave a multiple of 64 nope dims of Dh={dh}")
    _check_tokens("kv_write", positions, seq_ids, t, window_cache.shape[0])
    y = rms_norm(kv, weight, eps)
    out = torch.cat([fp8_simulate(y[:, :dh - r].contiguous(), 64), rope(y[:, dh - r:], positions, freqs)], dim=1)
    w = window_cache.shape[1]
    window_cache[seq_ids.long(), (positions % w).long()] = out
    return out


def window_indices(positions: torch.Tensor, window: int) -> torch.Tensor:
    """[T] -> [T, W] int32: ring slots of tokens p-W+1 .. p (oldest to newest), -1 before position 0."""
    tok = positions.long()[:, None] - window + 1 + torch.arange(window, device=positions.device)[None, :]
    return torch.where(tok >= 0, tok % window, torch.full_like(tok, -1)).to(torch.int32)


def attention_indices(positions: torch.Tensor, kind: str, window: int, ratio: int,
                      topk_indices: torch.Tensor | None) -> torch.Tensor:
    """positions [T] -> indices [T, W + K] int32 into the per-sequence cache [ring W | compressed].

    swa: the window only (K = 0). csa: + W + topk_indices[t] (K = topk_indices.shape[1]; -1 stays -1).
    hca: + W + i for every compressed entry i < (p+1)//ratio; K = max over the batch of (p+1)//ratio
    (read on the host: this reference syncs), shorter rows padded with -1."""
    if kind not in KINDS:
        raise ValueError(f"attention_indices: kind must be one of {KINDS}, got {kind!r}")
    if window <= 0:
        raise ValueError(f"attention_indices: window must be positive, got {window}")
    _check_tokens("attention_indices", positions, None, positions.shape[0] if positions.dim() == 1 else -1, None)
    win = window_indices(positions, window)
    if kind == "swa":
        return win
    if ratio <= 0:
        raise ValueError(f"attention_indices: {kind} needs a positive ratio, got {ratio}")
    if kind == "csa":
        if topk_indices is None or topk_indices.dim() != 2 or topk_indices.shape[0] != positions.shape[0]:
            raise ValueError("attention_indices: csa needs topk_indices [T, K]")
        n = (positions.long() + 1) // ratio
        ti = topk_indices.long()
        if ((ti >= n[:, None]) | (ti < -1)).any():
            raise ValueError("attention_indices: topk_indices must be -1 or a compressed entry < (p+1)//ratio")
        comp = torch.where(ti >= 0, ti + window, torch.full_like(ti, -1))
        return torch.cat([win, comp.to(torch.int32)], dim=1)
    n = (positions.long() + 1) // ratio
    k = int(n.max()) if n.numel() else 0
    i = torch.arange(k, device=positions.device)[None, :]
    comp = torch.where(i < n[:, None], i + window, torch.full_like(i, -1))
    return torch.cat([win, comp.to(torch.int32)], dim=1)
