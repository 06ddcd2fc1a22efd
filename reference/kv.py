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
    """[T] -> [T, W] int32: ring slots of tokens max(p-W+1, 0) .. p (oldest to newest), then -1 while
    p < W-1 (DeepSeek's column order: the empty columns come last; sparse attention reads the columns
    in blocks, so the order decides which entries share a block and thus the rounding)."""
    pos = positions.long()[:, None]
    tok = (pos - window + 1).clamp(min=0) + torch.arange(window, device=positions.device)[None, :]
    return torch.where(tok <= pos, tok % window, torch.full_like(tok, -1)).to(torch.int32)


def attention_indices(positions: torch.Tensor, kind: str, window: int, ratio: int,
                      topk_indices: torch.Tensor | None, n_max: int) -> tuple[torch.Tensor, torch.Tensor]:
    """positions [T] -> indices [T, n_max] int32 into the per-sequence cache [ring W | compressed],
    lengths [T] int32.

    The width n_max is fixed by the caller from the layer kind, never read from the positions (so the
    op is CUDA-graph capturable): swa W; csa W + K (K = topk_indices.shape[1]); hca W + Ncap (the
    cache's compressed capacity, e.g. capacity // ratio).
    Columns [0, W): the window ring slots of tokens max(p-W+1, 0) .. p (oldest to newest), then -1
    (only while p < W-1: the empty columns come last, as DeepSeek's).
    csa: column W + j = W + topk_indices[t, j] (-1 stays -1). hca: column W + i = W + i for every
    compressed entry i < (p+1)//ratio, -1 past it.
    lengths[t]: columns >= lengths[t] hold no entry (swa W, csa W + min((p+1)//ratio, K): a top-k row has at
    most (p+1)//ratio entries, -1 padded after them, hca W + (p+1)//ratio); columns
    below it may still be -1. The WORK of attention must scale with lengths, not with n_max: an hca row
    is mostly -1 at short contexts, and sparse_attention(lengths=...) reads only columns < lengths[t].
    This reference reads positions and topk_indices on the host to validate them; the Triton kernel
    does not (values are the caller's contract)."""
    k = check_attention_indices(positions, kind, window, ratio, topk_indices, n_max)
    _check_tokens("attention_indices", positions, None, positions.shape[0], None)
    win = window_indices(positions, window)
    t = positions.shape[0]
    if kind == "swa":
        return win, torch.full((t,), window, dtype=torch.int32, device=positions.device)
    n = (positions.long() + 1) // ratio
    if kind == "csa":
        ti = topk_indices.long()
        if ((ti >= n[:, None]) | (ti < -1)).any():
            raise ValueError("attention_indices: topk_indices must be -1 or a compressed entry < (p+1)//ratio")
        if ((ti >= 0) & (torch.arange(k, device=ti.device)[None, :] >= n[:, None])).any():
            raise ValueError("attention_indices: a topk_indices row holds entries only in its first (p+1)//ratio "
                             "columns, -1 after them (the indexer's -1 padding)")
        comp = torch.where(ti >= 0, ti + window, torch.full_like(ti, -1))
        lengths = (window + n.clamp(max=k)).to(torch.int32)
        return torch.cat([win, comp.to(torch.int32)], dim=1), lengths
    if t and int(n.max()) > k:
        raise ValueError(f"attention_indices: hca position {int(positions.max())} has {int(n.max())} compressed "
                         f"entries, more than the n_max - W = {k} columns")
    i = torch.arange(k, device=positions.device)[None, :]
    comp = torch.where(i < n[:, None], i + window, torch.full_like(i, -1))
    return torch.cat([win, comp.to(torch.int32)], dim=1), (window + n).to(torch.int32)


def check_window(op: str, window) -> None:
    """The window W of an index list: a positive int (ValueError naming `op`)."""
    if isinstance(window, bool) or not isinstance(window, int) or window <= 0:
        raise ValueError(f"{op}: window must be a positive int, got {window!r}")


def check_attention_indices(positions: torch.Tensor, kind: str, window: int, ratio: int,
                            topk_indices: torch.Tensor | None, n_max: int) -> int:
    """Shape/argument checks (no tensor values read), shared with the Triton wrapper -> the number of
    compressed columns n_max - W."""
    if kind not in KINDS:
        raise ValueError(f"attention_indices: kind must be one of {KINDS}, got {kind!r}")
    check_window("attention_indices", window)
    if isinstance(n_max, bool) or not isinstance(n_max, int):
        raise TypeError(f"attention_indices: n_max must be an int, got {type(n_max).__name__}")
    if positions.dim() != 1:
        raise ValueError(f"attention_indices: positions must be [T], got {tuple(positions.shape)}")
    if positions.dtype.is_floating_point or positions.dtype == torch.bool:
        raise TypeError(f"attention_indices: positions must be integers, got {positions.dtype}")
    if kind == "swa":
        if n_max != window:
            raise ValueError(f"attention_indices: swa has n_max = W = {window} columns, got n_max={n_max}")
        return 0
    if isinstance(ratio, bool) or not isinstance(ratio, int) or ratio <= 0:
        raise ValueError(f"attention_indices: {kind} needs a positive int ratio, got {ratio!r}")
    if kind == "csa":
        if topk_indices is None or topk_indices.dim() != 2 or topk_indices.shape[0] != positions.shape[0]:
            raise ValueError("attention_indices: csa needs topk_indices [T, K]")
        if topk_indices.dtype.is_floating_point or topk_indices.dtype == torch.bool:
            raise TypeError(f"attention_indices: topk_indices must be integers, got {topk_indices.dtype}")
        if n_max != window + topk_indices.shape[1]:
            raise ValueError(f"attention_indices: csa has n_max = W + K = {window + topk_indices.shape[1]} "
                             f"columns, got n_max={n_max}")
        return topk_indices.shape[1]
    if n_max < window:
        raise ValueError(f"attention_indices: hca needs n_max >= W = {window} (W + compressed capacity), "
                         f"got n_max={n_max}")
    return n_max - window
