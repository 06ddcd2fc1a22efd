"""The KV compressor (SPEC 3.4): gated softmax pooling of every r tokens into one cache entry.

Letters: T tokens, B sequences, D hidden, d entry width (512 attention, 128 indexer), c = 2 when
r = 4 (overlap) else 1, r compress ratio, R rope dims, Ncap cache capacity, L prefix length.

Per token (fp32): kv_t = x W_kv^T [c*d], s_t = x W_gate^T + ape[p % r]. When (p+1) % r == 0 the
block ending at p is pooled: per channel, a softmax over the pooled rows of s weights the rows of kv.
  r >= 8 (no overlap): the r rows of the block.
  r = 4 (overlap): 2r rows: the previous block's rows on channels [0, d) and this block's rows on
  channels [d, 2d); for the first block the previous rows are kv = 0, score = -inf.
The pooled entry (cast to bf16, as DeepSeek's model.py does before the norm) is RMS-normed, RoPE'd
on its last R dims at the block's first position p + 1 - r, then either FP8-simulated on its first
d - R dims (attention, group 64, UE8M0) or Hadamard-rotated and FP4-simulated (indexer, group 32),
and stored at compressed index p // r.

State layout per sequence (DeepSeek's model.py, decode path): state_kv[B, c*r, c*d] fp32 and
state_score (same shape; initial values 0 and -inf).
  no overlap: row p % r holds token p.
  overlap:    rows [r, 2r): row r + p % r holds token p (the current block);
              rows [0, r): the previous complete block (copied from [r, 2r) at every emission).
Rows are never cleared, so at any time row j (+ r) holds the most recent token t with t % r == j;
`compressor_prefill` builds exactly that state, so a prefix then steps equals steps from the start.
"""
from __future__ import annotations

import torch

from kernelbench.reference.hadamard import hadamard
from kernelbench.reference.norm import rms_norm
from kernelbench.reference.precision import acc
from kernelbench.reference.quant import fp4_simulate, fp8_simulate
from kernelbench.reference.rope import rope


def overlap_factor(ratio: int) -> int:
    if ratio != 4 and (ratio < 8 or ratio % 4):
        raise ValueError(f"compressor: ratio must be 4 (overlap) or a multiple of 4 >= 8, got {ratio}")
    return 2 if ratio == 4 else 1


def init_state(batch: int, ratio: int, d: int, device="cpu") -> tuple[torch.Tensor, torch.Tensor]:
    """Fresh per-sequence state: (kv zeros, score -inf), each [B, c*r, c*d] fp32."""
    c = overlap_factor(ratio)
    return (torch.zeros(batch, c * ratio, c * d, device=device),
            torch.full((batch, c * ratio, c * d), float("-inf"), device=device))


def check_weights(name, x, wkv, wgate, ape, norm_weight, freqs, ratio) -> tuple[int, int]:
    """-> (c, d). Clear errors for inconsistent weights."""
    c = overlap_factor(ratio)
    if x.dim() != 2 or x.dtype != torch.bfloat16:
        raise ValueError(f"{name}: x must be bf16 [T, D], got {tuple(x.shape)} {x.dtype}")
    d = norm_weight.shape[0] if norm_weight.dim() == 1 else -1
    for what, w in (("wkv", wkv), ("wgate", wgate)):
        if w.shape != (c * d, x.shape[1]):
            raise ValueError(f"{name}: {what} must be [c*d={c * d}, D={x.shape[1]}], got {tuple(w.shape)}")
    if ape.shape != (ratio, c * d) or ape.dtype != torch.float32:
        raise ValueError(f"{name}: ape must be fp32 [r={ratio}, c*d={c * d}], got {tuple(ape.shape)} {ape.dtype}")
    r_dims = 2 * freqs.shape[0]
    if not 0 < r_dims < d or (d - r_dims) % 64:
        raise ValueError(f"{name}: R={r_dims} rope dims must leave a multiple of 64 of d={d}")
    return c, d


def finalize(e: torch.Tensor, norm_weight: torch.Tensor, eps: float, block_start: torch.Tensor,
             freqs: torch.Tensor, rotate: bool) -> torch.Tensor:
    """Pooled entries [M, d] (compute dtype) -> cache entries [M, d] bf16."""
    d, r = e.shape[1], 2 * freqs.shape[0]
    y = rms_norm(e.to(torch.bfloat16), norm_weight, eps)
    y = torch.cat([y[:, :d - r], rope(y[:, d - r:], block_start, freqs)], dim=1)
    if rotate:
        return fp4_simulate(hadamard(y), 32)
    return torch.cat([fp8_simulate(y[:, :d - r].contiguous(), 64), y[:, d - r:]], dim=1)


def pool(kv_rows: torch.Tensor, score_rows: torch.Tensor) -> torch.Tensor:
    """[..., rows, d] -> [..., d]: per-channel softmax over the rows of the score weights the kv rows."""
    return (kv_rows * torch.softmax(score_rows, dim=-2)).sum(dim=-2)


def check_key_outputs(key_codes, key_exps, cache, rotate: bool) -> bool:
    """compressor_step's optional FP4 key outputs (the indexer compressor's entries also in the FP4 key cache's form,
    reference/indexer.py fp4_key_rows): both or neither; with rotate (d = 128) only; codes [B, Ncap, 64] / exponents
    [B, Ncap, 4] uint8 beside cache [B, Ncap, 128]. -> whether they are given."""
    if key_codes is None and key_exps is None:
        return False
    from kernelbench.reference.indexer import check_fp4_keys
    if key_codes is None or key_exps is None:
        raise ValueError("compressor_step: key_codes and key_exps go together")
    if not rotate:
        raise ValueError("compressor_step: the FP4 key outputs are the indexer compressor's (rotate=True)")
    check_fp4_keys(key_codes, key_exps, "compressor_step", ("key_codes", "key_exps"))
    if key_codes.shape[:2] != cache.shape[:2] or key_codes.device != cache.device:
        raise ValueError(f"compressor_step: key_codes must be [B, Ncap, 64] beside cache {tuple(cache.shape)} on "
                         f"{cache.device}, got {tuple(key_codes.shape)} on {key_codes.device}")
    return True


def compressor_step(x, wkv, wgate, ape, norm_weight, eps, positions, seq_ids, freqs, state_kv, state_score,
                    cache, ratio: int, rotate: bool, key_codes=None, key_exps=None) -> torch.Tensor:
    """One decode step for T tokens of distinct sequences; updates state_* and cache in place.
    Returns emitted [T] bool (True where (p+1) % r == 0 and cache[seq, p // r] was written). With key_codes /
    key_exps (`check_key_outputs`), each written entry also goes to them at [seq, p // r] as `fp4_key_rows`."""
    c, d = check_weights("compressor_step", x, wkv, wgate, ape, norm_weight, freqs, ratio)
    t = x.shape[0]
    b = cache.shape[0]
    if state_kv.shape != (b, c * ratio, c * d) or state_score.shape != state_kv.shape:
        raise ValueError(f"compressor_step: states must be [B={b}, c*r={c * ratio}, c*d={c * d}], got "
                         f"{tuple(state_kv.shape)} and {tuple(state_score.shape)}")
    if cache.dim() != 3 or cache.shape[2] != d or cache.dtype != torch.bfloat16:
        raise ValueError(f"compressor_step: cache must be bf16 [B, Ncap, d={d}], got {tuple(cache.shape)} {cache.dtype}")
    from kernelbench.reference.kv import _check_tokens
    _check_tokens("compressor_step", positions, seq_ids, t, b)
    keys = check_key_outputs(key_codes, key_exps, cache, rotate)
    pos, seq = positions.long(), seq_ids.long()
    if t and int((pos // ratio).max()) >= cache.shape[1] and bool(((pos + 1) % ratio == 0).any()):
        raise ValueError(f"compressor_step: entry p // r exceeds the cache capacity Ncap={cache.shape[1]}")
    kv = acc(x) @ acc(wkv).t()                                     # (T, c*d)
    score = acc(x) @ acc(wgate).t() + acc(ape)[pos % ratio]
    slot = (ratio if c == 2 else 0) + pos % ratio
    state_kv[seq, slot] = kv.to(state_kv.dtype)
    state_score[seq, slot] = score.to(state_score.dtype)
    emitted = (pos + 1) % ratio == 0
    if not bool(emitted.any()):
        return emitted
    es = seq[emitted]
    sk, ss = acc(state_kv[es]), acc(state_score[es])              # (M, c*r, c*d)
    if c == 2:
        sk = torch.cat([sk[:, :ratio, :d], sk[:, ratio:, d:]], dim=1)
        ss = torch.cat([ss[:, :ratio, :d], ss[:, ratio:, d:]], dim=1)
        state_kv[es, :ratio] = state_kv[es, ratio:]
        state_score[es, :ratio] = state_score[es, ratio:]
    ep = pos[emitted]
    rows = finalize(pool(sk, ss), norm_weight, eps, ep + 1 - ratio, freqs, rotate)
    for i, (s, e) in enumerate(zip(es.tolist(), (ep // ratio).tolist())):   # a row at a time: the cache may be the
        cache[s, e] = rows[i]                                              # FP4 key cache's staging view (stride 0)
    if keys:
        from kernelbench.reference.indexer import fp4_key_rows
        codes, exps = fp4_key_rows(rows)
        key_codes[es, ep // ratio] = codes
        key_exps[es, ep // ratio] = exps
    return emitted


def compressor_prefill(x, wkv, wgate, ape, norm_weight, eps, freqs, ratio: int, rotate: bool):
    """A whole prefix x [L, D] of one sequence from position 0 at once (block pooling, no loop).
    Returns (entries [L // r, d] bf16, state_kv [c*r, c*d] fp32, state_score): the entries and the
    state that L calls of compressor_step would leave."""
    c, d = check_weights("compressor_prefill", x, wkv, wgate, ape, norm_weight, freqs, ratio)
    n_tok = x.shape[0]
    pos = torch.arange(n_tok, device=x.device)
    kv = acc(x) @ acc(wkv).t()                                     # (L, c*d)
    score = acc(x) @ acc(wgate).t() + acc(ape)[pos % ratio]
    nb = n_tok // ratio
    kb = kv[:nb * ratio].reshape(nb, ratio, c * d)
    sb = score[:nb * ratio].reshape(nb, ratio, c * d)
    if c == 2:   # previous block's rows on channels [0, d), this block's on [d, 2d)
        prev_k = torch.cat([torch.zeros_like(kb[:1, :, :d]), kb[:-1, :, :d]], dim=0)
        prev_s = torch.cat([torch.full_like(sb[:1, :, :d], float("-inf")), sb[:-1, :, :d]], dim=0)
        kb = torch.cat([prev_k, kb[:, :, d:]], dim=1)
        sb = torch.cat([prev_s, sb[:, :, d:]], dim=1)
    starts = torch.arange(nb, device=x.device) * ratio
    entries = finalize(pool(kb, sb), norm_weight, eps, starts, freqs, rotate) if nb else \
        torch.empty(0, d, dtype=torch.bfloat16, device=x.device)
    # state: row j (+ r) = the latest token t with t % r == j; rows [0, r) = last complete block
    st_k, st_s = (t[0] for t in init_state(1, ratio, d, x.device))
    off = ratio if c == 2 else 0
    for j in range(min(ratio, n_tok)):
        last = j + ((n_tok - 1 - j) // ratio) * ratio
        st_k[off + j], st_s[off + j] = kv[last], score[last]
        if c == 2 and nb:
            st_k[j], st_s[j] = kv[(nb - 1) * ratio + j], score[(nb - 1) * ratio + j]
    return entries, st_k, st_s
