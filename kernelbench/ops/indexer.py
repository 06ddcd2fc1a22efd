"""Op specs: indexer_q, indexer_topk and csa_indices (reference/indexer.py).

Letters: T tokens, B sequences (T + 1 slots), Qr q_lora_rank, Hi indexer heads, Di = 128, R rope
dims, ctx the longest sequence's length, S4 = (p+1)//4 a token's actual keys, cap = Ncap the key
cache's capacity (>= S4; deployment cases also use the 1M-token capacity), K top-k.

Keys and queries are FP4-simulated as in the model (Hadamard then e2m1 with power-of-two scales),
so exact score ties occur; "ties" mode also repeats key rows. Key rows at or past S4 are NaN: a
kernel that reads beyond the actual length (the 18x bug of SPEC section 6) shows it.
"""
from __future__ import annotations

import torch
from hypothesis import strategies as st

from kernelbench.config import FLASH, ShapeSet
from kernelbench.ops.attention import token_positions
from kernelbench.ops.norm import draw
from kernelbench.reference.hadamard import hadamard
from kernelbench.reference.indexer import KEY_GROUP, csa_indices, fp4_pack_keys, indexer_q, indexer_topk
from kernelbench.reference.quant import fp4_simulate, quant_fp8_weight
from kernelbench.reference.rope import rope_freqs
from kernelbench.registry import Cost, OpSpec, Tolerance, register_op

DI = 128


def fp4_rows(shape, gen: torch.Generator, values: str = "normal") -> torch.Tensor:
    """Random rows as the model stores them: Hadamard-rotated, FP4-simulated (group 32), bf16."""
    x = hadamard(draw(shape, gen, values))
    return fp4_simulate(x.reshape(-1, DI), 32).reshape(shape)


# indexer_q ---------------------------------------------------------------------------------------
def _q_inputs(p, gen, device, values):
    wq, ws = quant_fp8_weight(torch.randn(p["Hi"] * DI, p["Qr"], generator=gen) * p["Qr"] ** -0.5)
    return {"qr": draw((p["T"], p["Qr"]), gen, values, device=device), "weight": wq.to(device),
            "weight_scale": ws.to(device), "positions": token_positions({**p, "ctx": p.get("ctx", 64)}).to(device),
            "freqs": rope_freqs(FLASH.replace(rope_head_dim=p["R"]), compressed=True).to(device)}


register_op(OpSpec(
    name="indexer_q", family="indexer", reference=indexer_q, make_inputs=_q_inputs,
    batch_key="T",
    cases=lambda ss: [{"T": t, "Qr": ss.config.q_lora_rank, "Hi": hi, "R": ss.config.rope_head_dim, "ctx": 8192,
                       "ragged": t > 1}
                      for t in ss.batches for hi in sorted({ss.config.index_n_heads, ss.config.index_n_heads // ss.tp})],
    strategy=lambda: st.fixed_dictionaries({"T": st.integers(1, 4), "Qr": st.sampled_from([128, 256]),
                                            "Hi": st.integers(1, 4), "R": st.just(64), "ctx": st.integers(1, 500),
                                            "ragged": st.booleans()}),
    cost=lambda p: Cost(flops=2.0 * p["T"] * p["Hi"] * DI * (p["Qr"] + DI),
                        bytes=1.0 * p["Hi"] * DI * p["Qr"] + 2.0 * p["T"] * (p["Qr"] + p["Hi"] * DI)),
    tolerance=lambda p: {"qi": Tolerance(
        atol=1e-6, rtol=2 ** -7, rel_fro=2 ** -4, max_mismatch_frac=3e-2,
        why="fp8 GEMM (bf16 out, 1 ulp may flip), RoPE and Hadamard in fp32 with bf16 outputs; the final FP4 "
            "simulation turns a 1-ulp move across an e2m1 rounding boundary into a whole e2m1 step (up to "
            "2^-1 rel): allowed for < 3% of elements, bounded in rel_fro")},
    outputs=("qi",), value_modes=("normal", "outliers"),
    doc="indexer query: fp8 linear, RoPE on the last R dims, Hadamard, FP4 simulation",
))


# indexer_topk ------------------------------------------------------------------------------------
def _topk_inputs(p, gen, device, values):
    t, hi, ratio = p["T"], p["Hi"], p.get("ratio", 4)
    pos = token_positions(p)
    n = (pos + 1) // ratio
    cap = p["cap"]
    b = t + 1
    seq_ids = torch.randperm(b, generator=gen)[:t]
    keys = torch.full((b, cap, DI), float("nan"), dtype=torch.bfloat16)
    for i in range(t):
        ni = int(n[i])
        if ni:
            rows = fp4_rows((ni, DI), gen)
            if values == "ties":       # repeated keys: exact score ties, broken toward the lower index
                src = torch.randint(0, ni, (ni,), generator=gen)
                rows = rows[torch.where(torch.rand(ni, generator=gen) < 0.5, src, torch.arange(ni))]
            keys[int(seq_ids[i]), :ni] = rows
    qi = fp4_rows((t, hi, DI), gen)
    w = torch.randn(t, hi, generator=gen).bfloat16()      # weights_proj(x) in bf16; the op scales it, as the decoder
    return {"qi": qi.to(device), "w": w.to(device), "k_cache": keys.to(device), "seq_ids": seq_ids.to(device),
            "positions": pos.to(device), "topk": p["topk"], "ratio": ratio, "w_scale": DI ** -0.5 * hi ** -0.5}


def _topk_cases(ss: ShapeSet) -> list[dict]:
    c = ss.config
    out = []
    for t in ss.batches:
        for ctx in ss.contexts:
            out.append({"T": t, "Hi": c.index_n_heads, "topk": c.index_topk, "ctx": ctx, "cap": ctx // 4,
                        "ragged": False})
        if max(ss.contexts) >= 65536:   # same actual length, 1M-token capacity: time must not change
            out.append({"T": t, "Hi": c.index_n_heads, "topk": c.index_topk, "ctx": 8192,
                        "cap": c.max_position_embeddings // 4, "ragged": False})
    return out


# bytes a key in the FP4 key cache (impl triton_fp4keys): two e2m1 codes a byte, one UE8M0 byte per 32 dims
FP4_KEY_BYTES = DI // 2 + DI // KEY_GROUP


def _topk_cost(p, key_bytes: float = 2.0 * DI) -> Cost:
    ratio = p.get("ratio", 4)
    keys = float(((token_positions(p) + 1) // ratio).sum())
    t, hi, k = p["T"], p["Hi"], p["topk"]
    return Cost(flops=2.0 * keys * hi * DI + 2.0 * keys * hi,
                bytes=key_bytes * keys + 2.0 * t * hi * DI + 4.0 * t * hi + 16.0 * t + 8.0 * t * k)


TOPK_TOL = {
    "indices": Tolerance(exact=False, atol=0, rtol=0, max_mismatch_frac=5e-2,
                         why="the bf16 roundings (per-head dots, products with w, the head sum) are part of the "
                             "op and happen in both; only the fp32 head sum (exact in the fp64 reference) can "
                             "move a score by one bf16 ulp where its own rounding crosses a bf16 boundary, which "
                             "can reorder the many exact bf16 ties around it. Exact ties are ordered by index "
                             "and must match: tests/test_indexer.py checks exactness on inputs whose scores are "
                             "exact in fp32, and the tie rule on hand-made ties."),
    "scores": Tolerance(atol=1e-6, rtol=2 ** -7, rel_fro=2 ** -8,
                        why="the sorted k best scores are bf16 values: equal, except where a score's fp32 head "
                            "sum rounds to the neighbouring bf16 value (<= 1 bf16 ulp, <= 2^-7 rel; atol for "
                            "sums that cancel to ~0)"),
}

register_op(OpSpec(
    name="indexer_topk", family="indexer", reference=indexer_topk, make_inputs=_topk_inputs, cases=_topk_cases,
    batch_key="T",
    strategy=lambda: st.fixed_dictionaries({
        "T": st.integers(1, 4), "Hi": st.sampled_from([1, 4, 16, 20]), "topk": st.sampled_from([1, 8, 40]),
        "ctx": st.integers(1, 400), "cap": st.integers(100, 130), "ragged": st.booleans()}),
    cost=_topk_cost, tolerance=lambda p: TOPK_TOL, outputs=("indices", "scores"),
    forms={"fp4keys": lambda p: _topk_cost(p, FP4_KEY_BYTES)},
    value_modes=("normal", "ties"),
    doc="lightning indexer bf16 scores (DeepSeek's rounding) over the ACTUAL (p+1)//ratio keys, exact top-k "
        "(ties to the lower index)",
))


# csa_indices -------------------------------------------------------------------------------------
# indexer_topk's cases and inputs with the window W: the decode step's csa layers take their attention index lists
# from the top-k directly (one launch fewer than indexer_topk + attention_indices on the path sparse attention waits on)
def _csa_inputs(p, gen, device, values):
    args = _topk_inputs(p, gen, device, values)
    return {**args, "window": p["W"]}


def _csa_cost(p, key_bytes: float = 2.0 * DI) -> Cost:
    c = _topk_cost(p, key_bytes)
    t, k = p["T"], p["topk"]
    return Cost(flops=c.flops, bytes=c.bytes - 8.0 * t * k + 4.0 * t * (p["W"] + k + 1))   # no scores; row + length


CSA_TOL = {"indices": TOPK_TOL["indices"],
           "lengths": Tolerance(exact=True, why="W + min((p+1)//ratio, K) from the positions: exact")}

register_op(OpSpec(
    name="csa_indices", family="indexer", reference=csa_indices, make_inputs=_csa_inputs,
    cases=lambda ss: [{**c, "W": ss.config.window_size} for c in _topk_cases(ss)],
    batch_key="T",
    strategy=lambda: st.fixed_dictionaries({
        "T": st.integers(1, 4), "Hi": st.sampled_from([1, 4, 16, 20]), "topk": st.sampled_from([1, 8, 40]),
        "W": st.sampled_from([4, 16]), "ctx": st.integers(1, 400), "cap": st.integers(100, 130),
        "ragged": st.booleans()}),
    cost=_csa_cost, tolerance=lambda p: CSA_TOL, outputs=("indices", "lengths"),
    forms={"fp4keys": lambda p: _csa_cost(p, FP4_KEY_BYTES)},
    value_modes=("normal", "ties"),
    doc="a csa layer's attention index lists from the indexer: attention_indices(csa, W, indexer_topk(...)): "
        "the window ring's slots, then W + the selected entries (-1 padded), lengths W + min((p+1)//4, K)",
))


# fp4_pack_keys -----------------------------------------------------------------------------------
# The decoder's FP4 key cache (KERNELBENCH_KEY_CACHE=fp4): the indexer compressor writes a step's entries into a
# staging row per sequence, and this op packs those of the emitting tokens into the cache (reference/indexer.py).
def _pack_inputs(p, gen, device, values):
    t, cap = p["T"], p["cap"]
    b = t + 1
    seq_ids = torch.randperm(b, generator=gen)[:t]
    if values == "unsimulated":         # any bf16 entry: the op quantizes (act_quant_fp4's rule), exactly
        staged = draw((b, DI), gen, "normal").bfloat16()
    else:
        staged = fp4_rows((b, DI), gen, values)
    codes = torch.randint(0, 256, (b, cap, DI // 2), generator=gen, dtype=torch.uint8)   # slots left as they were
    exps = torch.randint(0, 256, (b, cap, DI // 32), generator=gen, dtype=torch.uint8)
    return {"staged": staged.to(device), "positions": token_positions(p).to(device), "seq_ids": seq_ids.to(device),
            "ratio": p.get("ratio", 4), "codes": codes.to(device), "exps": exps.to(device)}


def _pack_cases(ss: ShapeSet) -> list[dict]:
    """The Flash TP8 decode batches at context 512, ragged: some tokens emit an entry, some do not."""
    return [{"T": t, "ctx": 512, "cap": 128, "ragged": True} for t in ss.batches]


def _pack_cost(p) -> Cost:
    pos = token_positions(p)
    m = float(((pos + 1) % p.get("ratio", 4) == 0).sum())     # tokens that write an entry
    return Cost(flops=4.0 * m * DI, bytes=16.0 * p["T"] + p["T"] + m * (2.0 * DI + DI // 2 + DI // 32))


PACK_TOL = Tolerance(exact=True, why="act_quant_fp4's rule on bf16 values: exact arithmetic (a power-of-two scale, "
                                     "round-to-nearest-even codes), so the packed bytes are exact")

register_op(OpSpec(
    name="fp4_pack_keys", family="indexer", reference=fp4_pack_keys, make_inputs=_pack_inputs, cases=_pack_cases,
    batch_key="T",
    strategy=lambda: st.fixed_dictionaries({
        "T": st.integers(1, 6), "ctx": st.integers(1, 60), "cap": st.integers(15, 20), "ragged": st.booleans()}),
    cost=_pack_cost, tolerance=lambda p: {"emitted": PACK_TOL, "codes": PACK_TOL, "exps": PACK_TOL},
    outputs=("emitted",), inplace=("codes", "exps"), value_modes=("normal", "unsimulated"),
    doc="the FP4 key cache's write: each emitting token's staged index key (its sequence's row) as two e2m1 codes "
        "a byte and a UE8M0 exponent byte per 32 dims at [seq, p // ratio]",
))
