"""Op specs: compressor_step and compressor_prefill (reference/compressor.py).

Letters: T tokens, B sequences (T + 1 slots), D hidden, d entry width (512 attention / 128 indexer),
c = 2 for r = 4 (overlap) else 1, r ratio, R rope dims, ctx the longest sequence's length, L prefix.

Step inputs carry a realistic state: every row holds projected data of earlier tokens (random here),
and sequences still in their first block have the initial previous rows (kv 0, score -inf).
Deployment cases put every token at the end of a block (ctx % r == 0), the step that pools, norms,
rotates, quantizes and writes: the most work a step can do.
"""
from __future__ import annotations

import torch
from hypothesis import strategies as st

from kernelbench.config import FLASH, ShapeSet
from kernelbench.ops.attention import token_positions
from kernelbench.ops.norm import draw
from kernelbench.reference.compressor import compressor_prefill, compressor_step, init_state, overlap_factor
from kernelbench.reference.rope import rope_freqs
from kernelbench.registry import Cost, OpSpec, Tolerance, register_op


def _weights(p, gen, device, values):
    c = overlap_factor(p["ratio"])
    d, dim = p["d"], p["D"]
    return {"wkv": draw((c * d, dim), gen, "normal", scale=dim ** -0.5, device=device),
            "wgate": draw((c * d, dim), gen, "normal", scale=dim ** -0.5, device=device),
            "ape": (0.5 * torch.randn(p["ratio"], c * d, generator=gen)).to(device),
            "norm_weight": (1 + 0.25 * draw((d,), gen)).to(device=device, dtype=torch.bfloat16),
            "eps": 1e-6,
            "freqs": rope_freqs(FLASH.replace(rope_head_dim=p["R"]), compressed=True).to(device)}


def _step_inputs(p, gen, device, values):
    t, r, d = p["T"], p["ratio"], p["d"]
    c = overlap_factor(r)
    pos = token_positions(p)
    b = t + 1
    seq_ids = torch.randperm(b, generator=gen)[:t]
    sk, ss = init_state(b, r, d)
    sk.normal_(generator=gen)
    ss.copy_(torch.randn(ss.shape, generator=gen))
    for i in range(t):
        if c == 2 and int(pos[i]) < r:     # first block: the previous rows are the initial ones
            sk[seq_ids[i], :r], ss[seq_ids[i], :r] = 0.0, float("-inf")
    ncap = p["ctx"] // r + 2
    return {"x": draw((t, p["D"]), gen, values, device=device), **_weights(p, gen, device, values),
            "positions": pos.to(device), "seq_ids": seq_ids.to(device), "state_kv": sk.to(device),
            "state_score": ss.to(device), "cache": draw((b, ncap, d), gen, device=device),
            "ratio": r, "rotate": p["rotate"]}


def _cases(ss: ShapeSet) -> list[dict]:
    c = ss.config
    out = []
    for t in ss.batches:
        hca = max(c.compress_ratios)
        for ratio, d, rotate in ((4, c.head_dim, False), (hca, c.head_dim, False), (4, c.index_head_dim, True)):
            out.append({"T": t, "D": c.dim, "d": d, "R": c.rope_head_dim, "ratio": ratio, "rotate": rotate,
                        "ctx": 8192, "ragged": False})
    return out


def _strategy():
    return st.fixed_dictionaries({
        "T": st.integers(1, 4), "D": st.sampled_from([64, 128]), "d": st.sampled_from([128, 512]),
        "R": st.just(64), "ratio": st.sampled_from([4, 8]), "rotate": st.booleans(),
        "ctx": st.integers(1, 40), "ragged": st.booleans()}).filter(lambda p: not p["rotate"] or p["d"] == 128)


def _step_cost(p) -> Cost:
    c = overlap_factor(p["ratio"])
    t, dim, d, r = p["T"], p["D"], p["d"], p["ratio"]
    pos = token_positions(p)
    m = int(((pos + 1) % r == 0).sum())               # tokens that pool and write an entry
    rows = c * r
    return Cost(flops=2.0 * 2 * t * c * d * dim + m * (4.0 * rows * d + 20.0 * d + (2.0 * 128 * d if p["rotate"] else 0)),
                bytes=2.0 * t * dim + 2.0 * 2 * c * d * dim + 4.0 * r * c * d + 2.0 * d + 8.0 * t * c * d   # x, W, ape, state rows
                + m * (8.0 * rows * d + (32.0 * r * d if c == 2 else 0.0) + 2.0 * d))   # pooled rows, overlap shift, entry


def _tol(p) -> dict:
    rot = p["rotate"]
    entry = Tolerance(atol=1e-6, rtol=2 ** -7, rel_fro=2 ** -4 if rot else 2 ** -6,
                      max_mismatch_frac=3e-2 if rot else 5e-3,
                      why="pooled entry in fp32 -> bf16 -> norm -> RoPE (bf16 roundings, 1 ulp may flip each); "
                          "then FP8 (e4m3 step 2^-3 rel) or Hadamard + FP4 (e2m1 step up to 2^-1 rel) simulation: "
                          "an input moved by 1 bf16 ulp across a rounding boundary moves a whole quantization step, "
                          "rare for e4m3 (< 0.5% of elements), more common for e2m1 (< 3%); rel_fro bounds those.")
    state = Tolerance(atol=6e-5, rtol=1e-5, rel_fro=1e-5,
                      why="fp32 projections x @ W^T over D terms of N(0,1) x N(0,1/D), outputs O(1): accumulation-"
                          "order error is a random walk of ~sqrt(D) * 2^-24 (4e-6 at D=4096) per element, so the "
                          "largest of ~5e5 elements reaches ~5 sigma (measured on the H200 at Flash shapes: max_abs "
                          "2.2e-5, rel_fro 2.2e-6; the first bound, 1e-5 / 1e-6, was one sigma); scores add ape exactly")
    return {"emitted": Tolerance(exact=True, why="(p+1) % r == 0, exact"), "cache": entry,
            "state_kv": state, "state_score": state}


register_op(OpSpec(
    name="compressor_step", family="compressor", reference=compressor_step, make_inputs=_step_inputs,
    batch_key="T",
    cases=_cases, strategy=_strategy, cost=_step_cost, tolerance=_tol, outputs=("emitted",),
    inplace=("state_kv", "state_score", "cache"), value_modes=("normal", "outliers"),
    doc="one decode step of the KV compressor: state update, every r tokens gated softmax pooling, norm, "
        "RoPE at p+1-r, FP8 (attention) or Hadamard+FP4 (indexer) simulation, cache write at p // r",
))


# compressor_prefill ------------------------------------------------------------------------------
def _prefill_inputs(p, gen, device, values):
    return {"x": draw((p["L"], p["D"]), gen, values, device=device), **_weights(p, gen, device, values),
            "ratio": p["ratio"], "rotate": p["rotate"]}


def _prefill_tol(p) -> dict:
    t = _tol(p)
    return {"entries": t["cache"], "state_kv": t["state_kv"], "state_score": t["state_score"]}


register_op(OpSpec(
    name="compressor_prefill", family="compressor", reference=compressor_prefill, make_inputs=_prefill_inputs,
    cases=lambda ss: [{"L": L, "D": ss.config.dim, "d": d, "R": ss.config.rope_head_dim, "ratio": r, "rotate": rot}
                      for L in (512, 1000) for r, d, rot in ((4, ss.config.head_dim, False),
                                                               (max(ss.config.compress_ratios), ss.config.head_dim, False),
                                                               (4, ss.config.index_head_dim, True))],
    strategy=lambda: st.fixed_dictionaries({
        "L": st.integers(1, 40), "D": st.sampled_from([64, 128]), "d": st.just(128), "R": st.just(64),
        "ratio": st.sampled_from([4, 8]), "rotate": st.booleans()}),
    cost=lambda p: Cost(flops=4.0 * p["L"] * overlap_factor(p["ratio"]) * p["d"] * p["D"],
                        bytes=2.0 * p["L"] * p["D"] + 4.0 * overlap_factor(p["ratio"]) * p["d"] * p["D"]
                        + 2.0 * (p["L"] // p["ratio"]) * p["d"]),
    tolerance=_prefill_tol, outputs=("entries", "state_kv", "state_score"), value_modes=("normal",),
    doc="a whole prefix of one sequence from position 0: the entries and the state L steps would leave",
))
