"""Sparse MQA decode attention with an attention sink (SPEC 3.4).

Letters: T tokens, B sequences, N cache entries per sequence (W + Ncap), Hl heads per rank,
Dh head dim (512; K = V = the whole entry), Ksel selected entries per token, R rope dims.

For token t and head h over the selected j (index -1 = masked):
    s_j = (q_h . kv_j) * scale;  m = max_j s_j
    o_h = sum_j e^{s_j - m} kv_j / (sum_j e^{s_j - m} + e^{sink_h - m})
The sink enters the denominator only. DeepSeek's `sparse_attn` returns bf16 and model.py then
applies the inverse RoPE to the bf16 output's last R dims; this reference does the same (two bf16
roundings), a fused kernel may rotate before its single cast.

The official arithmetic (DeepSeek's TileLang `sparse_attn`, which this follows rounding for rounding):
the index columns are read in blocks of 64, in column order, with an online softmax; per block the
running max m grows to include the block, the running sum and the fp32 accumulator are rescaled by
e^{m_old - m_new}, and the weights p_j = e^{s_j - m_new} enter the sum in fp32 but the product with
the values ROUNDED TO BF16 (the kernel's bf16 P @ V). So the weights are rounded relative to the
running max of their block. Without that rounding o moves by ~0.2% (rel), which the FP8
re-quantisation before wo_b amplifies to ~1% at the attention output (issue 11, measured against
the official model: docs/perf/fidelity.md).
"""
from __future__ import annotations

import torch

from kernelbench.reference.precision import acc
from kernelbench.reference.rope import rope


def check_sparse_attention(q, kv, seq_ids, indices, sink, positions, freqs, lengths=None) -> None:
    """Shape/dtype validation shared with the Triton wrapper (clear errors on bad input)."""
    if q.dim() != 3 or kv.dim() != 3 or q.shape[2] != kv.shape[2]:
        raise ValueError(f"sparse_attention: q [T, Hl, Dh] and kv [B, N, Dh] must agree, got {tuple(q.shape)} "
                         f"and {tuple(kv.shape)}")
    if q.dtype != torch.bfloat16 or kv.dtype != torch.bfloat16:
        raise TypeError(f"sparse_attention: q and kv must be bf16, got {q.dtype}, {kv.dtype}")
    t, hl, dh = q.shape
    if indices.dim() != 2 or indices.shape[0] != t:
        raise ValueError(f"sparse_attention: indices must be [T={t}, Ksel], got {tuple(indices.shape)}")
    if indices.dtype not in (torch.int32, torch.int64):
        raise TypeError(f"sparse_attention: indices must be int32 (or int64), got {indices.dtype}")
    if seq_ids.dim() != 1 or seq_ids.shape[0] != t or seq_ids.dtype.is_floating_point:
        raise ValueError(f"sparse_attention: seq_ids must be integer [T={t}], got {tuple(seq_ids.shape)} {seq_ids.dtype}")
    if sink.dim() != 1 or sink.shape[0] != hl or sink.dtype != torch.float32:
        raise ValueError(f"sparse_attention: sink must be fp32 [Hl={hl}], got {tuple(sink.shape)} {sink.dtype}")
    if (positions is None) != (freqs is None):
        raise ValueError("sparse_attention: positions and freqs go together (both or neither)")
    if lengths is not None and (lengths.dim() != 1 or lengths.shape[0] != t or lengths.dtype not in
                                (torch.int32, torch.int64)):
        raise ValueError(f"sparse_attention: lengths must be int32 [T={t}], got {tuple(lengths.shape)} {lengths.dtype}")
    if positions is not None:
        if positions.dim() != 1 or positions.shape[0] != t:
            raise ValueError(f"sparse_attention: positions must be [T={t}], got {tuple(positions.shape)}")
        if freqs.dim() != 1 or not 0 < 2 * freqs.shape[0] <= dh:
            raise ValueError(f"sparse_attention: freqs must be [R/2] with R <= Dh, got {tuple(freqs.shape)}")


def check_index_ranges(kv, seq_ids, indices) -> None:
    """Value checks (they read the tensors, so the graph-capturable kernel skips them)."""
    if seq_ids.numel() and (int(seq_ids.min()) < 0 or int(seq_ids.max()) >= kv.shape[0]):
        raise ValueError(f"sparse_attention: seq_ids must lie in [0, B={kv.shape[0]})")
    if indices.numel() and (int(indices.min()) < -1 or int(indices.max()) >= kv.shape[1]):
        raise ValueError(f"sparse_attention: indices must be -1 or in [0, N={kv.shape[1]}), got range "
                         f"[{int(indices.min())}, {int(indices.max())}]")


def apply_lengths(indices: torch.Tensor, lengths: torch.Tensor | None) -> torch.Tensor:
    """indices [T, Ksel] with every column >= lengths[t] set to -1 (those columns are never read, whatever
    they hold); lengths values must lie in [0, Ksel] (checked: this reads them on the host)."""
    if lengths is None:
        return indices
    if lengths.numel() and (int(lengths.min()) < 0 or int(lengths.max()) > indices.shape[1]):
        raise ValueError(f"sparse_attention: lengths must lie in [0, Ksel={indices.shape[1]}], got range "
                         f"[{int(lengths.min())}, {int(lengths.max())}]")
    col = torch.arange(indices.shape[1], device=indices.device)[None, :]
    return torch.where(col < lengths.long()[:, None], indices, torch.full_like(indices, -1))


OFFICIAL_BLOCK = 64      # selected entries per step of DeepSeek's sparse_attn kernel


def online_softmax_bf16_pv(s: torch.Tensor, values: torch.Tensor, sink: torch.Tensor,
                           block: int = OFFICIAL_BLOCK) -> torch.Tensor:
    """s [T, Hl, K] scores (-inf = masked), values [T, K, Dh], sink [Hl] -> o [T, Hl, Dh] in s's dtype:
    the online softmax over blocks of `block` columns with the sink in the denominator, the weights
    rounded to bf16 for the product with the values (see the module docstring). A row with no valid
    entry gives 0."""
    t, hl, k = s.shape
    m = torch.full((t, hl), float("-inf"), dtype=s.dtype, device=s.device)
    l_sum = torch.zeros((t, hl), dtype=s.dtype, device=s.device)
    o = torch.zeros((t, hl, values.shape[-1]), dtype=s.dtype, device=s.device)
    for k0 in range(0, k, block):
        sb = s[..., k0:k0 + block]
        m_new = torch.maximum(m, sb.amax(dim=-1))
        m_safe = torch.where(m_new == float("-inf"), torch.zeros((), dtype=s.dtype), m_new)
        alpha = torch.exp(m - m_safe)                                  # 0 while nothing was valid
        p = torch.exp(sb - m_safe[..., None])
        l_sum = l_sum * alpha + p.sum(dim=-1)
        pv = torch.einsum("thk,tkd->thd", p.to(torch.bfloat16).to(s.dtype), values[:, k0:k0 + block])
        o = o * alpha[..., None] + pv
        m = m_new
    m_safe = torch.where(m == float("-inf"), torch.zeros((), dtype=s.dtype), m)
    return o / (l_sum + torch.exp(sink[None, :] - m_safe))[..., None]


def sparse_attention(q: torch.Tensor, kv: torch.Tensor, seq_ids: torch.Tensor, indices: torch.Tensor,
                     sink: torch.Tensor, scale: float, positions: torch.Tensor | None = None,
                     freqs: torch.Tensor | None = None, lengths: torch.Tensor | None = None) -> torch.Tensor:
    """q [T, Hl, Dh] bf16, kv [B, N, Dh] bf16, indices [T, Ksel] -> o [T, Hl, Dh] bf16.
    lengths [T] int32 (optional): token t reads only columns < lengths[t] of its index row (the rest is
    ignored, whatever it holds), so a kernel's work follows lengths, not Ksel."""
    check_sparse_attention(q, kv, seq_ids, indices, sink, positions, freqs, lengths)
    indices = apply_lengths(indices, lengths)
    check_index_ranges(kv, seq_ids, indices)
    idx = indices.long()
    valid = idx >= 0                                                   # (T, Ksel)
    sel = acc(kv[seq_ids.long()[:, None], idx.clamp(min=0)])           # (T, Ksel, Dh)
    sel = torch.where(valid[..., None], sel, torch.zeros((), dtype=sel.dtype))   # a masked row is never read
    s = torch.einsum("thd,tkd->thk", acc(q), sel) * scale              # (T, Hl, Ksel)
    s = s.masked_fill(~valid[:, None, :], float("-inf"))
    o = online_softmax_bf16_pv(s, sel, acc(sink))
    o = o.to(torch.bfloat16)
    if positions is not None:
        r = 2 * freqs.shape[0]
        o = torch.cat([o[..., :-r], rope(o[..., -r:], positions, freqs, inverse=True)], dim=-1)
    return o


def check_attention_wo_a(q: torch.Tensor, wo_a: torch.Tensor) -> tuple[int, int, int]:
    """sparse_attention_wo_a's wo_a against q (no values read; shared with the Triton wrappers): a 3-D bf16
    [Gl, O, Hl/Gl*Dh] -> (Gl, O, Hg*Dh)."""
    if not isinstance(wo_a, torch.Tensor) or wo_a.dtype != torch.bfloat16 or wo_a.dim() != 3:
        raise ValueError(f"sparse_attention_wo_a: wo_a must be a 3-D bf16 tensor, got "
                         f"{getattr(wo_a, 'dtype', type(wo_a).__name__)} {tuple(getattr(wo_a, 'shape', ()))}")
    gl, o, i = wo_a.shape
    if q.dim() != 3 or gl < 1 or q.shape[1] % gl or i != q.shape[1] // gl * q.shape[2]:
        raise ValueError(f"sparse_attention_wo_a: wo_a [Gl, O, Hl/Gl*Dh] expected for q {tuple(q.shape)}, got "
                         f"{tuple(wo_a.shape)}")
    return gl, o, i


def sparse_attention_wo_a(q: torch.Tensor, kv: torch.Tensor, seq_ids: torch.Tensor, indices: torch.Tensor,
                          sink: torch.Tensor, scale: float, wo_a: torch.Tensor, positions: torch.Tensor | None = None,
                          freqs: torch.Tensor | None = None, lengths: torch.Tensor | None = None) -> torch.Tensor:
    """The attention output's first projection after the attention: grouped_wo_a(o as [T, Gl, Hg*Dh], wo_a) with
    o = sparse_attention(...) (bf16, as DeepSeek's model feeds wo_a) -> z [T, Gl, O] bf16. wo_a [Gl, O, Hg*Dh] bf16,
    Gl output groups of Hg = Hl / Gl consecutive heads."""
    from kernelbench.reference.linear import grouped_wo_a
    gl, _, _ = check_attention_wo_a(q, wo_a)
    o = sparse_attention(q, kv, seq_ids, indices, sink, scale, positions, freqs, lengths)
    return grouped_wo_a(o.reshape(q.shape[0], gl, -1), wo_a)
