"""Planted bug: sparse_attention whose validity mask is off by one (`idx > 0`): cache slot 0, the
first window slot, is treated as masked. A kernel that tests `idx > 0` where it meant `idx >= 0`
(or starts its loop at 1) computes exactly this."""
import torch

from kernelbench.registry import register_impl


@register_impl("sparse_attention", "planted_mask")
def sparse_attention(q, kv, seq_ids, indices, sink, scale, positions=None, freqs=None, lengths=None, config=None):
    from kernelbench.reference.attention import apply_lengths
    from kernelbench.reference.rope import rope
    idx = apply_lengths(indices, lengths).long()
    valid = idx > 0                                                    # BUG: should be idx >= 0
    sel = kv[seq_ids.long()[:, None], idx.clamp(min=0)].float()        # (T, Ksel, Dh)
    sel = torch.where(valid[..., None], sel, torch.zeros((), dtype=sel.dtype))
    s = torch.einsum("thd,tkd->thk", q.float(), sel) * scale
    s = s.masked_fill(~valid[:, None, :], float("-inf"))
    snk = sink.float()[None, :].expand(q.shape[0], -1)
    m = torch.maximum(s.amax(dim=-1), snk)
    e = torch.exp(s - m[..., None])
    o = (torch.einsum("thk,tkd->thd", e, sel) / (e.sum(-1) + torch.exp(snk - m))[..., None]).to(torch.bfloat16)
    if positions is not None:
        r = 2 * freqs.shape[0]
        o = torch.cat([o[..., :-r], rope(o[..., -r:], positions, freqs, inverse=True)], dim=-1)
    return o
