"""The lightning indexer (SPEC 3.4, ratio-4 layers): its query path and the top-k selection.

Letters: T tokens, B sequences, Qr q_lora_rank, Hi indexer heads (64 per rank or fewer), Di = 128
indexer head dim, R rope dims, Ncap capacity of the indexer key cache, S4 = (p+1)//ratio the
sequence's ACTUAL number of compressed keys, K top-k.

score[t] = sum_h w_h * relu(qi_h . k_t) for t < S4 (w already holds 128^-0.5 * Hi^-0.5), in DeepSeek's
bf16 arithmetic (`einsum` of bf16 q and keys, then `(scores.relu() * w).sum(heads)` on bf16 tensors),
rounded where torch rounds: each head's dot product (fp32 accumulation, one bf16 rounding), each
relu'd product with the bf16 weight, and the sum over heads (fp32 accumulation, one bf16 rounding).
These roundings are the contract and stay under every compute dtype (`acc` sets the accumulation
between them). The official code all-reduces per-rank bf16 partial sums under TP; the decoder here
replicates the indexer (kernelbench/decoder/model.py), which is the official arithmetic at world size 1.
selected = the min(K, S4) best, ties broken toward the lower entry index (bf16 scores tie often at
the k-th place; DeepSeek uses torch.topk, whose tie order is unspecified), padded with -1 (indices)
and -inf (scores; the selected scores are bf16 values, returned as fp32). Everything is sized by S4,
never by Ncap.
"""
from __future__ import annotations

import torch

from kernelbench.reference.hadamard import hadamard
from kernelbench.reference.precision import acc
from kernelbench.reference.quant import act_quant_fp4, e2m1_decode, fp4_simulate, unpack_fp4
from kernelbench.reference.rope import rope

DI = 128
KEY_GROUP = 32      # the FP4 key cache's group: one UE8M0 exponent byte per 32 dims (the indexer compressor's)


def indexer_q(qr: torch.Tensor, weight: torch.Tensor, weight_scale: torch.Tensor, positions: torch.Tensor,
              freqs: torch.Tensor) -> torch.Tensor:
    """qr [T, Qr] bf16, weight [Hi*128, Qr] e4m3 (+ e8m0 block scales) -> qi [T, Hi, 128] bf16:
    fp8 linear, RoPE on the last R dims, Hadamard, FP4 simulation (group 32)."""
    from kernelbench.reference.linear import fp8_linear   # imported late: a sibling module
    if weight.dim() != 2 or weight.shape[0] % DI:
        raise ValueError(f"indexer_q: weight must be [Hi*128, Qr], got {tuple(weight.shape)}")
    q = fp8_linear(qr, weight, weight_scale)                          # (T, Hi*128) bf16
    t, hi = q.shape[0], weight.shape[0] // DI
    q = q.view(t, hi, DI)
    r = 2 * freqs.shape[0]
    q = torch.cat([q[..., :DI - r], rope(q[..., DI - r:], positions, freqs)], dim=-1)
    q = hadamard(q)
    return fp4_simulate(q.reshape(t * hi, DI), 32).view(t, hi, DI)


def check_indexer_topk(qi, w, k_cache, seq_ids, positions, topk, ratio) -> None:
    if qi.dim() != 3 or qi.shape[2] != DI or qi.dtype != torch.bfloat16:
        raise ValueError(f"indexer_topk: qi must be bf16 [T, Hi, {DI}], got {tuple(qi.shape)} {qi.dtype}")
    t, hi, _ = qi.shape
    if w.shape != (t, hi) or w.dtype != torch.bfloat16:
        raise ValueError(f"indexer_topk: w must be bf16 [T={t}, Hi={hi}], got {tuple(w.shape)} {w.dtype}")
    if k_cache.dim() != 3 or k_cache.shape[2] != DI or k_cache.dtype != torch.bfloat16:
        raise ValueError(f"indexer_topk: k_cache must be bf16 [B, Ncap, {DI}], got {tuple(k_cache.shape)} {k_cache.dtype}")
    for name, v in (("seq_ids", seq_ids), ("positions", positions)):
        if v.dim() != 1 or v.shape[0] != t or v.dtype.is_floating_point or v.dtype == torch.bool:
            raise ValueError(f"indexer_topk: {name} must be integer [T={t}], got {tuple(v.shape)} {v.dtype}")
    if topk <= 0 or ratio <= 0:
        raise ValueError(f"indexer_topk: topk and ratio must be positive, got {topk}, {ratio}")


def check_w_scale(w_scale) -> None:
    if isinstance(w_scale, bool) or not isinstance(w_scale, (int, float)) or not 0 < w_scale < float("inf"):
        raise ValueError(f"indexer_topk: w_scale must be a positive finite number, got {w_scale!r}")


def check_ranges(k_cache, seq_ids, positions, ratio) -> None:
    """Value checks that read the tensors (skipped by the graph-capturable kernel)."""
    if not seq_ids.numel():
        return
    if int(seq_ids.min()) < 0 or int(seq_ids.max()) >= k_cache.shape[0]:
        raise ValueError(f"indexer_topk: seq_ids must lie in [0, B={k_cache.shape[0]})")
    if int(positions.min()) < 0:
        raise ValueError("indexer_topk: positions must be >= 0")
    if int(((positions + 1) // ratio).max()) > k_cache.shape[1]:
        raise ValueError(f"indexer_topk: (p+1)//ratio exceeds the key cache capacity Ncap={k_cache.shape[1]}")


def index_scores(qi: torch.Tensor, w: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
    """qi [Hi, 128] bf16, w [Hi] bf16, keys [S, 128] bf16 -> scores [S] bf16, rounded as the official."""
    bf16 = torch.bfloat16
    dots = acc((acc(keys) @ acc(qi).t()).to(bf16))                     # [S, Hi]: bf16 matmul output
    terms = acc((torch.relu(dots) * acc(w)[None, :]).to(bf16))
    return (terms.sum(dim=1) + 0.0).to(bf16)                          # + 0.0: a -0.0 sum ties with +0.0


# The FP4 key cache (SPEC 2, "KV cache storage": the indexer's keys "as FP4"): a key as two e2m1 codes a byte (the low
# nibble the even dim) [.., 64] uint8 and one UE8M0 exponent byte per 32 dims [.., 4] uint8 (2^(e - 127); 255 NaN),
# 68 bytes instead of 256. Every key the model writes is FP4-simulated in groups of 32, so the form holds it exactly.
def fp4_key_rows(entries: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Entries [M, 128] bf16 -> (codes [M, 64] uint8, exponents [M, 4] uint8) by act_quant_fp4's rule in groups of
    32 (s = 2^ceil(log2(max(amax, 6 * 2^-126) / 6)), round-to-nearest-even e2m1 codes): exact for FP4-simulated
    entries (a smaller s than the simulation's only doubles codes that stay <= 6)."""
    codes, s = act_quant_fp4(entries, KEY_GROUP)
    return codes, (torch.frexp(s)[1] + 126).to(torch.uint8)            # s = 2^(exp - 1)


def unpack_fp4_keys(codes: torch.Tensor, exps: torch.Tensor) -> torch.Tensor:
    """The FP4 key form [.., 64] / [.., 4] uint8 -> the keys [.., 128] bf16 (exponent 255: NaN)."""
    if codes.dtype != torch.uint8 or exps.dtype != torch.uint8 or codes.shape[-1] != DI // 2 \
            or exps.shape != (*codes.shape[:-1], DI // KEY_GROUP):
        raise ValueError(f"FP4 keys must be codes [.., {DI // 2}] and exponents [.., {DI // KEY_GROUP}] uint8, got "
                         f"{tuple(codes.shape)} {codes.dtype} and {tuple(exps.shape)} {exps.dtype}")
    scale = torch.ldexp(torch.ones(exps.shape, dtype=torch.float64, device=exps.device), exps.long() - 127)
    scale = torch.where(exps == 255, float("nan"), scale).repeat_interleave(KEY_GROUP, -1)
    return (e2m1_decode(unpack_fp4(codes)).double() * scale).to(torch.bfloat16)


def check_fp4_keys(k_cache: torch.Tensor, k_exp: torch.Tensor, op: str = "indexer_topk",
                   names: tuple[str, str] = ("k_cache", "k_exp")) -> None:
    """The FP4 key cache's form: codes [B, Ncap, 64] and exponents [B, Ncap, 4], uint8, one device (TypeError for a
    dtype, ValueError for a shape or device); errors name `op` and the two arguments (`names`)."""
    c, e = names
    if k_cache.dtype != torch.uint8 or k_exp.dtype != torch.uint8:
        raise TypeError(f"{op}: the FP4 key cache ({c} codes, {e}) must be uint8, got {k_cache.dtype} "
                        f"and {k_exp.dtype}")
    if k_cache.dim() != 3 or k_cache.shape[2] != DI // 2:
        raise ValueError(f"{op}: the FP4 key cache's {c} (codes) must be [B, Ncap, {DI // 2}], got "
                         f"{tuple(k_cache.shape)}")
    if k_exp.shape != (*k_cache.shape[:2], DI // KEY_GROUP) or k_exp.device != k_cache.device:
        raise ValueError(f"{op}: {e} must be [B, Ncap, {DI // KEY_GROUP}] beside {c} "
                         f"{tuple(k_cache.shape)}, got {tuple(k_exp.shape)} on {k_exp.device}")


def fp4_pack_keys(staged: torch.Tensor, positions: torch.Tensor, seq_ids: torch.Tensor, ratio: int,
                  codes: torch.Tensor, exps: torch.Tensor) -> torch.Tensor:
    """A decode step's new index keys into the FP4 key cache: every token t with (p + 1) % ratio == 0 had the indexer
    compressor write its entry to staged[seq_ids[t]] ([B, 128] bf16: compressor_step on the staging view
    staged[:, None].expand(B, Ncap, 128)); its `fp4_key_rows` go to codes[seq, p // ratio] and exps[seq, p // ratio]
    in place. -> emitted [T] bool."""
    from kernelbench.reference.kv import _check_tokens     # imported late: a sibling module
    if staged.dim() != 2 or staged.shape[1] != DI or staged.dtype != torch.bfloat16:
        raise ValueError(f"fp4_pack_keys: staged must be bf16 [B, {DI}], got {tuple(staged.shape)} {staged.dtype}")
    check_fp4_keys(codes, exps, "fp4_pack_keys", ("codes", "exps"))
    if codes.shape[0] != staged.shape[0]:
        raise ValueError(f"fp4_pack_keys: staged has {staged.shape[0]} sequence slots, the cache {codes.shape[0]}")
    if ratio <= 0:
        raise ValueError(f"fp4_pack_keys: ratio must be positive, got {ratio}")
    _check_tokens("fp4_pack_keys", positions, seq_ids, positions.shape[0], staged.shape[0])
    pos, seq = positions.long(), seq_ids.long()
    emitted = (pos + 1) % ratio == 0
    if bool(emitted.any()):
        es, slot = seq[emitted], pos[emitted] // ratio
        if int(slot.max()) >= codes.shape[1]:
            raise ValueError(f"fp4_pack_keys: entry p // r exceeds the cache capacity Ncap={codes.shape[1]}")
        q, e = fp4_key_rows(staged[es])
        codes[es, slot] = q
        exps[es, slot] = e
    return emitted


def indexer_topk(qi: torch.Tensor, w: torch.Tensor, k_cache: torch.Tensor, seq_ids: torch.Tensor,
                 positions: torch.Tensor, topk: int, ratio: int = 4, w_scale: float = 1.0,
                 k_exp: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """-> indices [T, topk] int32 (best first, ties to the lower index, -1 padded), scores [T, topk]
    fp32 holding the bf16 scores (-inf padded). w_scale: the head weights are w * w_scale rounded to bf16
    (DeepSeek's bf16 `weights_proj(x) * scale`: the caller may pass weights_proj(x) and the scale). k_exp: k_cache
    is the FP4 key cache's codes (`unpack_fp4_keys` gives the keys)."""
    if k_exp is not None:
        check_fp4_keys(k_cache, k_exp)
        k_cache = unpack_fp4_keys(k_cache, k_exp)
    check_indexer_topk(qi, w, k_cache, seq_ids, positions, topk, ratio)
    check_w_scale(w_scale)
    check_ranges(k_cache, seq_ids, positions, ratio)
    if w_scale != 1.0:
        w = (w.float() * w_scale).to(torch.bfloat16)                  # torch's bf16 * scalar: fp32 product, one rounding
    t = qi.shape[0]
    idx = torch.full((t, topk), -1, dtype=torch.int32, device=qi.device)
    val = torch.full((t, topk), float("-inf"), dtype=torch.float32, device=qi.device)
    for i in range(t):
        n = (int(positions[i]) + 1) // ratio
        if n == 0:
            continue
        s = index_scores(qi[i], w[i], k_cache[int(seq_ids[i]), :n])
        order = torch.sort(s, descending=True, stable=True)
        k = min(topk, n)
        idx[i, :k] = order.indices[:k].to(torch.int32)
        val[i, :k] = order.values[:k].to(torch.float32)
    return idx, val


def csa_indices(qi: torch.Tensor, w: torch.Tensor, k_cache: torch.Tensor, seq_ids: torch.Tensor,
                positions: torch.Tensor, topk: int, window: int, ratio: int = 4, w_scale: float = 1.0,
                k_exp: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """A csa layer's attention index lists straight from the indexer: attention_indices(kind "csa", window, ratio,
    topk_indices = indexer_topk(...) indices) -> indices [T, W + K] int32 (the window ring's slots, then W + each
    selected entry, -1 stays -1), lengths [T] int32 (W + min((p+1)//ratio, K)). The decode step needs only these
    (not the selected scores); a kernel may write the row in one pass from the top-k's registers."""
    from kernelbench.reference.kv import attention_indices, check_window     # imported late: a sibling module
    check_window("csa_indices", window)                       # before the top-k's work
    idx, _ = indexer_topk(qi, w, k_cache, seq_ids, positions, topk, ratio, w_scale, k_exp)
    return attention_indices(positions, "csa", window, ratio, idx, window + topk)
