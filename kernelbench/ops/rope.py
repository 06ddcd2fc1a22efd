"""Op specs: rope and head_rms_norm_rope (reference/rope.py).

Letters: T tokens, Hl heads per rank, Dh head dim, R rope dims, L context (positions are drawn in
[0, L), the last token at L - 1). `model` names the config whose theta/YaRN give the freqs and
`compressed` picks YaRN (CSA/HCA layers) or plain theta (SWA layers).
"""
from __future__ import annotations

import torch
from hypothesis import strategies as st

from kernelbench.config import ShapeSet, get_config
from kernelbench.ops.norm import BF16_RTOL, REL_FRO, draw, unique_cases
from kernelbench.reference.rope import head_rms_norm_rope, rope, rope_freqs
from kernelbench.registry import Cost, OpSpec, Tolerance, register_op


def freqs_for(p: dict) -> torch.Tensor:
    cfg = get_config(p["model"]).replace(rope_head_dim=p["R"])
    return rope_freqs(cfg, bool(p["compressed"]))


def positions_for(p: dict, n: int, gen: torch.Generator) -> torch.Tensor:
    pos = torch.randint(0, p["L"], (n,), generator=gen, dtype=torch.int64)
    pos[-1] = p["L"] - 1
    return pos


def _rope_cases(ss: ShapeSet) -> list[dict]:
    c = ss.config
    heads = (c.n_heads // ss.tp, c.index_n_heads // ss.tp, 1)   # q rope slice, indexer q, kv / entries
    return unique_cases([{"model": c.name, "N": t, "H": h, "R": c.rope_head_dim, "L": L, "compressed": comp}
                    for t in ss.batches for h in heads for L in ss.contexts for comp in (False, True)])


def _rope_inputs(p, gen, device, values):
    return {"x": draw((p["N"], p["H"], p["R"]), gen, values, device=device),
            "positions": positions_for(p, p["N"], gen).to(device),
            "freqs": freqs_for(p).to(device), "inverse": bool(p.get("inverse", False))}


_small = dict(model=st.just("tiny"), L=st.sampled_from([1, 7, 300, 4096, 1 << 20]), compressed=st.booleans())

register_op(OpSpec(
    name="rope", family="rope", reference=rope, make_inputs=_rope_inputs, cases=_rope_cases, batch_key="N",
    strategy=lambda: st.fixed_dictionaries({"N": st.integers(1, 4), "H": st.integers(1, 3),
                                            "R": st.sampled_from([8, 32, 64]), "inverse": st.booleans(), **_small}),
    cost=lambda p: Cost(flops=3.0 * p["N"] * p["H"] * p["R"],
                        bytes=2.0 * 2 * p["N"] * p["H"] * p["R"] + 8 * p["N"] + 2 * p["R"]),
    tolerance=lambda p: {"y": Tolerance(atol=1e-4, rtol=BF16_RTOL, rel_fro=REL_FRO,
                                        why="same fp32 angle in both (part of the op); cos/sin ~1 ulp and a 2-term "
                                            "difference: |err| <= ~4 * 2^-24 * |pair| (atol covers cancellation), "
                                            "then one bf16 rounding (<= 2^-7 rel)")},
    outputs=("y",), value_modes=("normal", "outliers", "large"),
    doc="interleaved-pair RoPE (and its inverse) on the last dim R",
))


def _q_cases(ss: ShapeSet) -> list[dict]:
    c = ss.config
    return unique_cases([{"model": c.name, "T": t, "Hl": c.n_heads // ss.tp, "Dh": c.head_dim, "R": c.rope_head_dim,
                     "L": L, "compressed": comp}
                    for t in ss.batches for L in ss.contexts for comp in (False, True)])


def _q_inputs(p, gen, device, values):
    return {"q": draw((p["T"], p["Hl"], p["Dh"]), gen, values, device=device),
            "positions": positions_for(p, p["T"], gen).to(device), "freqs": freqs_for(p).to(device), "eps": 1e-6}


register_op(OpSpec(
    name="head_rms_norm_rope", family="rope", reference=head_rms_norm_rope, make_inputs=_q_inputs, cases=_q_cases,
    batch_key="T",
    strategy=lambda: st.fixed_dictionaries({"T": st.integers(1, 4), "Hl": st.integers(1, 3),
                                            "Dh": st.sampled_from([64, 128, 96]), "R": st.sampled_from([32, 64]),
                                            **_small}),
    cost=lambda p: Cost(flops=p["T"] * p["Hl"] * (4.0 * p["Dh"] + 3.0 * p["R"]),
                        bytes=2.0 * 2 * p["T"] * p["Hl"] * p["Dh"] + 8 * p["T"] + 2 * p["R"]),
    tolerance=lambda p: {"y": Tolerance(
        atol=1e-4, rtol=2 * BF16_RTOL, rel_fro=2 * REL_FRO,
        why="the official bf16 roundings (q^2, mean, + eps, rsqrt, product) are part of the op and happen in "
            "both; only the fp32 sum of squares (exact in the fp64 reference) can move the rounded mean by one "
            "bf16 ulp (~2^-16 of heads), scaling that head by <= 2^-7 rel; plus the rotation's fp32 error "
            "(atol covers its cancellation) and the output's bf16 rounding (<= 2^-8 rel each side). "
            "tests/test_norm_rope.py pins the rounding steps bit-exactly, which this tolerance cannot")},
    outputs=("y",), value_modes=("normal", "outliers", "tiny", "large"),
    doc="q * rsqrt(mean_Dh(q^2) + eps) in DeepSeek's bf16 arithmetic (every step rounded), then RoPE on "
        "the last R dims",
))
