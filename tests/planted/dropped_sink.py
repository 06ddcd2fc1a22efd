"""Planted bug: sparse_attention that drops the attention sink: the softmax denominator is the sum
over the selected entries only, without exp(sink - m). Outputs come out too large (and NaN for a
token with no valid entry, where the sink alone keeps the reference finite)."""
import torch

from kernelbench.registry import register_impl


@register_impl("sparse_attention", "planted_sink")
def sparse_attention(q, kv, seq_ids, indices, sink, scale, positions=None, freqs=None, lengths=None, config=None):
    from kernelbench.reference.attention import apply_lengths
    from kernelbench.reference.rope import rope
    idx = apply_lengths(indices, lengths).long()
    valid = idx >= 0
    sel = kv[seq_ids.long()[:, None], idx.clamp(min=0)].float()
    sel = torch.where(valid[..., None], sel, torch.zeros((), dtype=sel.dtype))
    s = torch.einsum("thd,tkd->thk", q.float(), sel) * scale
    s = s.masked_fill(~valid[:, None, :], float("-inf"))
    m = s.amax(dim=-1)
    e = torch.exp(s - m[..., None])
    o = (torch.einsum("thk,tkd->thd", e, sel) / e.sum(-1)[..., None]).to(torch.bfloat16)   # BUG: no sink term
    if positions is not None:
        r = 2 * freqs.shape[0]
        o = torch.cat([o[..., :-r], rope(o[..., -r:], positions, freqs, inverse=True)], dim=-1)
    return o
