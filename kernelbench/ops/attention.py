"""Op specs: sparse_attention, sparse_attention_wo_a, kv_write, attention_indices (reference/attention.py,
reference/kv.py).

Letters: T tokens (one per sequence), B sequences (T + 1 slots, shuffled), Hl heads per rank, Dh
head dim, R rope dims, W window, r compress ratio, K indexer top-k, ctx the longest sequence's
length, Ncap compressed capacity, Ksel indices per token.

Positions are a deterministic function of the params (`token_positions`): "ragged" batches hold
sequences at different positions (some before the window fills, some before the first compressed
entry), so `cost` counts exactly the entries a token really reads. Cache rows no token may read
(ring slots not yet written, compressed entries past (p+1)//r) hold NaN: a kernel that touches a
masked entry shows it.
"""
from __future__ import annotations

import torch
from hypothesis import strategies as st

from kernelbench.config import FLASH, ShapeSet, divide
from kernelbench.ops.norm import draw
from kernelbench.ops.quant import fp8_dequantised
from kernelbench.reference.attention import sparse_attention, sparse_attention_wo_a
from kernelbench.reference.kv import attention_indices, kv_write, window_indices
from kernelbench.reference.quant import fp8_simulate
from kernelbench.reference.rope import rope_freqs
from kernelbench.registry import Cost, OpSpec, Tolerance, register_op

BF16_ULP = 2.0 ** -8          # bf16 unit roundoff (half an ulp at 1.0)
KIND_RATIO = {"swa": 0, "csa": 4, "hca": 128}


def token_positions(p: dict) -> torch.Tensor:
    """[T] int64: ctx - 1 for every token, or spread over [0, ctx) when ragged (token 0 at ctx - 1)."""
    t, ctx = p["T"], p["ctx"]
    if not p.get("ragged"):
        return torch.full((t,), ctx - 1, dtype=torch.int64)
    return torch.tensor([ctx - 1 - (i * 7919 + (i * i) % 13) % ctx for i in range(t)], dtype=torch.int64)


def ratio_of(p: dict) -> int:
    """The compress ratio: 0 (swa), 4 (csa), the params' "ratio" or 128 (hca)."""
    return p.get("ratio", 128) if p["kind"] == "hca" else KIND_RATIO[p["kind"]]


def n_compressed(p: dict, pos: torch.Tensor) -> torch.Tensor:
    r = ratio_of(p)
    return (pos + 1) // r if r else torch.zeros_like(pos)


def selected_counts(p: dict) -> torch.Tensor:
    """[T]: entries each token really attends (valid indices)."""
    pos = token_positions(p)
    win = torch.clamp(pos + 1, max=p["W"])
    n = n_compressed(p, pos)
    if p["kind"] == "csa":
        return win + torch.clamp(n, max=p["topk"])
    return win + n if p["kind"] == "hca" else win


def capacity(p: dict) -> int:
    """Compressed entries per sequence in the cache: a few past the longest sequence's, or the params'
    "cap" (allocated capacity, for sweeps at a fixed actual length) when larger."""
    r = ratio_of(p)
    return max(p["ctx"] // r + 3, p.get("cap", 0)) if r else 0


def ksel(p: dict) -> int:
    """The index row width n_max, fixed by the layer kind (never by the positions): swa W, csa W + K,
    hca W + the compressed capacity."""
    if p["kind"] == "csa":
        return p["W"] + p["topk"]
    return p["W"] + (capacity(p) if p["kind"] == "hca" else 0)


def row_lengths(p: dict) -> torch.Tensor:
    """[T]: the columns attention_indices declares (its lengths output): swa W, csa W + min((p+1)//r, K),
    hca W + (p+1)//r."""
    pos = token_positions(p)
    if p["kind"] == "hca":
        return p["W"] + n_compressed(p, pos)
    if p["kind"] == "csa":
        return p["W"] + torch.clamp(n_compressed(p, pos), max=p["topk"])
    return torch.full_like(pos, ksel(p))


def freqs_for(p: dict) -> torch.Tensor:
    return rope_freqs(FLASH.replace(rope_head_dim=p["R"]), compressed=p["kind"] != "swa")


# sparse_attention ------------------------------------------------------------------------------
def _draw_topk(p: dict, gen: torch.Generator, pos: torch.Tensor) -> torch.Tensor | None:
    """CSA: what the indexer could select, distinct compressed entries per token (-1 padded); else None."""
    if p["kind"] != "csa":
        return None
    n = n_compressed(p, pos)
    topk = torch.full((p["T"], p["topk"]), -1, dtype=torch.int32)
    for i in range(p["T"]):
        k = min(int(n[i]), p["topk"])
        topk[i, :k] = torch.randperm(int(n[i]), generator=gen)[:k].to(torch.int32)
    return topk


def _attn_indices(p: dict, gen: torch.Generator, pos: torch.Tensor) -> torch.Tensor:
    topk = _draw_topk(p, gen, pos)
    idx, lengths = attention_indices(pos, p["kind"], p["W"], ratio_of(p), topk, ksel(p))
    if p.get("ragged"):   # attention is order-invariant: put the -1 entries anywhere (below lengths)
        for i in range(p["T"]):
            n = int(lengths[i]) if p.get("lengths") else idx.shape[1]
            idx[i, :n] = idx[i, torch.randperm(n, generator=gen)]
    if p.get("lengths"):  # columns past lengths point at NaN rows (entry (p+1)//r): a kernel reading them shows
        col = torch.arange(idx.shape[1])[None, :]
        nan_row = (p["W"] + n_compressed(p, pos)).to(torch.int32)[:, None].expand_as(idx)
        idx = torch.where(col < lengths[:, None], idx, nan_row)
        return idx, lengths
    return idx, None


def fp8_simulated_cache(kv: torch.Tensor, rope_dims: int) -> torch.Tensor:
    """kv [B, N, Dh] bf16 with the first Dh - rope_dims dims FP8-simulated in groups of kv_fp8_group, as the model's
    attention caches hold them (kv_write, the compressor); unchanged when those dims do not split into groups."""
    b, n, dh = kv.shape
    nope, group = dh - rope_dims, FLASH.kv_fp8_group
    if nope <= 0 or nope % group:
        return kv
    out = kv.clone()
    out[..., :nope] = fp8_simulate(kv[..., :nope].reshape(-1, nope), group).reshape(b, n, nope)
    return out


def _attn_inputs(p, gen, device, values):
    t, hl, dh, w = p["T"], p["Hl"], p["Dh"], p["W"]
    pos = token_positions(p)
    b = t + 1
    seq_ids = torch.randperm(b, generator=gen)[:t]
    n = w + capacity(p)
    kv = draw((b, n, dh), gen, "normal" if values == "large" else values)
    kv = fp8_simulated_cache(kv, p["R"] if p.get("rope", True) else 0)
    for i in range(t):   # rows this token may never read are NaN
        s, pi = int(seq_ids[i]), int(pos[i])
        if pi + 1 < w:
            kv[s, pi + 1:w] = float("nan")
        kv[s, w + int(n_compressed(p, pos[i:i + 1])[0]):] = float("nan")
    qscale = 24.0 if values == "large" else 1.0    # large: logits in the hundreds (online-softmax stability)
    q = draw((t, hl, dh), gen, "normal" if values == "large" else values, scale=qscale)
    idx, lengths = _attn_indices(p, gen, pos)
    out = {"q": q.to(device), "kv": kv.to(device), "seq_ids": seq_ids.to(device), "indices": idx.to(device),
           "sink": (2.0 * torch.randn(hl, generator=gen)).to(device), "scale": dh ** -0.5,
           "positions": None, "freqs": None, "lengths": None if lengths is None else lengths.to(device)}
    if p.get("rope", True):
        out["positions"], out["freqs"] = pos.to(device), freqs_for(p).to(device)
    return out


def _attn_cases(ss: ShapeSet) -> list[dict]:
    c = ss.config
    hl = c.n_heads // ss.tp
    out = []
    for t in ss.batches:
        for ctx in sorted(set(ss.contexts) | {8192}):
            for kind in ("csa", "hca", "swa"):
                if kind == "swa" and ctx != 8192:
                    continue
                out.append({"T": t, "Hl": hl, "Dh": c.head_dim, "R": c.rope_head_dim, "W": c.window_size,
                            "kind": kind, "ratio": max(c.compress_ratios), "topk": c.index_topk, "ctx": ctx,
                            "ragged": False, "rope": True, "lengths": True})
    return out


def _attn_strategy():
    return st.fixed_dictionaries({
        "T": st.integers(1, 4), "Hl": st.sampled_from([1, 8, 16, 20]), "Dh": st.sampled_from([128, 512]),
        "R": st.just(64), "W": st.sampled_from([8, 16]), "kind": st.sampled_from(["csa", "hca", "swa"]), "ratio": st.just(8),
        "topk": st.sampled_from([4, 8, 24]), "ctx": st.integers(1, 160), "ragged": st.booleans(),
        "rope": st.booleans(), "lengths": st.booleans()})


def fp8_entry_bytes(p: dict) -> float:
    """Bytes a cache entry in the FP8 form (impl triton_fp8kv): e4m3 codes of the non-rope dims, the rope dims in
    bf16, one UE8M0 byte per 64 dims (584 at Dh 512, R 64)."""
    dh, r = p["Dh"], (p.get("R", 0) if p.get("rope", True) else 0)
    return (dh - r) + 2.0 * r + dh // FLASH.kv_fp8_group


def _attn_cost(p: dict, entry_bytes: float | None = None) -> Cost:
    valid = float(selected_counts(p).sum())
    t, hl, dh = p["T"], p["Hl"], p["Dh"]
    cols = float(row_lengths(p).sum()) if p.get("lengths") else float(t * ksel(p))   # index columns read
    entry = 2.0 * dh if entry_bytes is None else entry_bytes
    return Cost(flops=4.0 * valid * hl * dh,
                bytes=entry * valid + 2.0 * 2 * t * hl * dh + 4.0 * cols + 8.0 * t + 4.0 * hl
                + (4.0 * t if p.get("lengths") else 0.0))


ATTN_TOL = Tolerance(
    atol=2 * 2.0 ** -7, rtol=4 * BF16_ULP, rel_fro=4 * BF16_ULP,
    why="|err| <= ~2^-8 * max_j |kv_j| (p rounded to bf16 before the MMA), so these bounds assume N(0,1) "
        "cache rows (no 'outliers' mode: a 64x outlier row legitimately moves o by ~64x more). "
        "The reference rounds o to bf16, then (with RoPE) rotates and rounds again: up to 2 bf16 roundings "
        "(2 x 2^-8 rel); a tensor-core kernel also rounds p to bf16 before p @ V (2^-8 rel per weight, "
        "random signs, averaged by the softmax) and accumulates in fp32. o is a convex mix of N(0,1) rows, "
        "|o| <~ 4, and cancels toward 0, so atol = 2 bf16 ulps at |o| ~ 1 (2^-6) covers the near-zero "
        "elements. Measured rel_fro of the Triton kernel vs the fp64 reference: 0.004-0.005 (three bf16 "
        "roundings of ~2^-9 rms each); rel_fro 2^-6 catches systematic errors (dropped sink, wrong scale, a missed entry).")

register_op(OpSpec(
    name="sparse_attention", family="attention", reference=sparse_attention, make_inputs=_attn_inputs,
    batch_key="T",
    cases=_attn_cases, strategy=_attn_strategy, cost=_attn_cost, tolerance=lambda p: {"o": ATTN_TOL},
    forms={"fp8kv": lambda p: _attn_cost(p, fp8_entry_bytes(p))},
    outputs=("o",), value_modes=("normal", "large"),   # no "outliers": the bf16 p error scales with max|kv|
    doc="sparse MQA decode attention over the selected entries with the sink in the denominator, fused "
        "inverse RoPE; indices -1 are masked; columns >= lengths[t] (optional) are not read",
))


# sparse_attention_wo_a ---------------------------------------------------------------------------
# The attention's output with wo_a applied (the decode step's sparse_attention then grouped_wo_a): one op so that a
# kernel may join the attention's split partials inside wo_a's GEMV (no o round trip, one launch fewer)
def _woa_inputs(p, gen, device, values):
    """sparse_attention's inputs; wo_a as the model holds it, a checkpoint FP8 weight dequantised to bf16 (exact)."""
    i = p["Hl"] // p["Gl"] * p["Dh"]
    return {**_attn_inputs(p, gen, device, values), "wo_a": fp8_dequantised(p["O"], i, gen, p["Gl"]).to(device)}


def _woa_cases(ss: ShapeSet) -> list[dict]:
    c = ss.config
    return [{**a, "Gl": divide(c.o_groups, ss.tp), "O": c.o_lora_rank} for a in _attn_cases(ss)]


def _woa_strategy():
    """sparse_attention's draws, with Gl output groups (2 when the heads split evenly) and O outputs."""
    return st.tuples(_attn_strategy(), st.sampled_from([1, 2]), st.sampled_from([32, 64])).map(
        lambda d: {**d[0], "Gl": d[1] if d[0]["Hl"] % d[1] == 0 else 1, "O": d[2]})


def _woa_cost(p: dict) -> Cost:
    a = _attn_cost(p)
    t, gl, o, i = p["T"], p["Gl"], p["O"], p["Hl"] // p["Gl"] * p["Dh"]
    return Cost(flops=a.flops + 2.0 * t * gl * o * i,
                bytes=a.bytes - 2.0 * t * p["Hl"] * p["Dh"] + 2.0 * gl * o * i + 2.0 * t * gl * o)


WOA_TOL = Tolerance(
    atol=2 * 2.0 ** -7, rtol=4 * BF16_ULP + 2.0 ** -8, rel_fro=4 * BF16_ULP + 2.0 ** -8,
    why="o carries sparse_attention's error (ATTN_TOL: up to three bf16 roundings, rel_fro <= 2^-6); wo_a is a "
        "linear map with N(0, 1/I) weights, so z keeps o's relative error (averaged over I terms), and z is rounded "
        "to bf16 once more (2^-8 either side). A kernel that joins the attention's partials inside the GEMV rounds o "
        "as the two ops do; only the order of the fp32 sums (over the splits, then over I) differs.")

register_op(OpSpec(
    name="sparse_attention_wo_a", family="attention", reference=sparse_attention_wo_a, make_inputs=_woa_inputs,
    batch_key="T", cases=_woa_cases, strategy=_woa_strategy, cost=_woa_cost, tolerance=lambda p: {"z": WOA_TOL},
    outputs=("z",), value_modes=("normal", "large"),
    doc="grouped_wo_a(sparse_attention(...) as [T, Gl, Hg*Dh], wo_a): the attention output's first projection "
        "(the decode step's pair, one op: a kernel may join the attention's split partials inside wo_a's GEMV)",
))


# kv_write ----------------------------------------------------------------------------------------
def _kvw_inputs(p, gen, device, values):
    t, dh, w = p["T"], p["Dh"], p["W"]
    pos = token_positions(p)
    b = t + 2
    return {"kv": draw((t, dh), gen, values, device=device),
            "weight": (1 + 0.25 * draw((dh,), gen)).to(device=device, dtype=torch.bfloat16),
            "eps": 1e-6, "positions": pos.to(device),
            "seq_ids": torch.randperm(b, generator=gen)[:t].to(device),
            "freqs": rope_freqs(FLASH.replace(rope_head_dim=p["R"]), compressed=p.get("compressed", False)).to(device),
            "window_cache": draw((b, w, dh), gen, "normal", device=device)}


def _kvw_cases(ss: ShapeSet) -> list[dict]:
    c = ss.config
    return [{"T": t, "Dh": c.head_dim, "R": c.rope_head_dim, "W": c.window_size, "ctx": ctx, "ragged": t > 1,
             "compressed": comp} for t in ss.batches for ctx in ss.contexts for comp in (False, True)]


KVW_TOL = Tolerance(
    atol=1e-6, rtol=2 * BF16_ULP, rel_fro=2.0 ** -6, max_mismatch_frac=2e-3,
    why="norm in fp32 then bf16 (1 ulp may flip, 2^-8 rel); RoPE in fp32 of bf16 inputs (1 more ulp). The "
        "FP8 simulation of the 448 nope dims quantizes the bf16 norm output: when a kernel's fp32 sum of "
        "squares differs by rounding, a bf16 value near an e4m3 rounding boundary moves a whole e4m3 step "
        "(2^-3 rel) for that element; such flips are rare (< 2e-3 of elements), and rel_fro bounds them.")

register_op(OpSpec(
    name="kv_write", family="attention", reference=kv_write, make_inputs=_kvw_inputs, cases=_kvw_cases,
    batch_key="T",
    strategy=lambda: st.fixed_dictionaries({
        "T": st.integers(1, 5), "Dh": st.sampled_from([128, 512]), "R": st.just(64), "W": st.sampled_from([4, 16]),
        "ctx": st.integers(1, 70), "ragged": st.booleans(), "compressed": st.booleans()}),
    cost=lambda p: Cost(flops=12.0 * p["T"] * p["Dh"], bytes=2.0 * (3 * p["T"] * p["Dh"] + p["Dh"]) + 16.0 * p["T"]),
    tolerance=lambda p: {"kv_out": KVW_TOL, "window_cache": KVW_TOL},
    outputs=("kv_out",), inplace=("window_cache",), value_modes=("normal", "outliers", "large"),
    doc="kv_norm, RoPE on the last R dims, FP8 simulation (group 64) of the rest, ring write at p % W",
))


# attention_indices -------------------------------------------------------------------------------
def _ai_inputs(p, gen, device, values):
    pos = token_positions(p)
    topk = _draw_topk(p, gen, pos)
    topk = None if topk is None else topk.to(device)
    return {"positions": pos.to(device), "kind": p["kind"], "window": p["W"], "ratio": ratio_of(p),
            "topk_indices": topk, "n_max": ksel(p)}


def _ai_cost(p: dict) -> Cost:
    """Reads positions (+ the top-k rows for csa), writes the n_max-wide rows and the lengths."""
    t = p["T"]
    return Cost(flops=0.0, bytes=8.0 * t + 4.0 * t * (ksel(p) + 1) + (4.0 * t * p["topk"] if p["kind"] == "csa" else 0.0))


register_op(OpSpec(
    name="attention_indices", family="attention", reference=attention_indices, make_inputs=_ai_inputs,
    batch_key="T",
    cases=lambda ss: [{"T": t, "W": ss.config.window_size, "kind": k, "ratio": max(ss.config.compress_ratios),
                       "topk": ss.config.index_topk, "ctx": ctx, "ragged": t > 1}
                      for t in ss.batches for ctx in ss.contexts for k in ("swa", "csa", "hca")],
    strategy=lambda: st.fixed_dictionaries({
        "T": st.integers(1, 5), "W": st.sampled_from([4, 16]), "kind": st.sampled_from(["swa", "csa", "hca"]), "ratio": st.just(8),
        "topk": st.sampled_from([2, 8]), "ctx": st.integers(1, 100), "ragged": st.booleans()}),
    cost=_ai_cost,
    tolerance=lambda p: {"indices": Tolerance(exact=True, why="integer index lists: exact"),
                         "lengths": Tolerance(exact=True, why="integer counts: exact")},
    outputs=("indices", "lengths"),
    doc="window ring (oldest to newest, -1 empty) + CSA top-k / HCA all compressed entries, offset by W; "
        "fixed width n_max from the layer kind, lengths[t] = columns that may hold an entry",
))

__all__ = ["token_positions", "selected_counts", "window_indices", "row_lengths"]
