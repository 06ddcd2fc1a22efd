"""Op spec: embedding (reference/embed.py), the vocab-parallel lookup.

Letters: T tokens, V vocab, Vl = V/TP rows on a rank, D hidden. Cases put the shard in the middle of
the vocab (rank TP//2), and draw half the ids inside the shard and half anywhere in [0, V), so both
the lookup and the zero rows are exercised.
"""
from __future__ import annotations

import torch
from hypothesis import strategies as st

from kernelbench.config import ShapeSet, divide
from kernelbench.ops.norm import draw, unique_cases
from kernelbench.reference.embed import embedding
from kernelbench.registry import Cost, OpSpec, Tolerance, register_op


def _cases(ss: ShapeSet) -> list[dict]:
    c = ss.config
    vl = divide(c.vocab_size, ss.tp)
    return unique_cases([{"T": t, "V": c.vocab_size, "Vl": vl, "D": c.dim, "vocab_start": (ss.tp // 2) * vl}
                    for t in ss.batches])


def _inputs(p, gen, device, values):
    t, vs, vl = p["T"], p["vocab_start"], p["Vl"]
    inside = torch.randint(vs, vs + vl, (t,), generator=gen)
    anywhere = torch.randint(0, p["V"], (t,), generator=gen)
    pick = torch.rand(t, generator=gen) < 0.5
    return {"ids": torch.where(pick, inside, anywhere).to(device),
            "weight": draw((vl, p["D"]), gen, values, device=device), "vocab_start": vs}


@st.composite
def _strategy(draw_):
    vl = draw_(st.integers(1, 40))
    ranks = draw_(st.integers(1, 4))
    return {"T": draw_(st.integers(1, 6)), "V": vl * ranks, "Vl": vl, "D": draw_(st.sampled_from([8, 64, 100])),
            "vocab_start": vl * draw_(st.integers(0, ranks - 1))}


register_op(OpSpec(
    name="embedding", family="embed", reference=embedding, make_inputs=_inputs, cases=_cases, strategy=_strategy,
    batch_key="T",
    cost=lambda p: Cost(flops=0.0, bytes=8.0 * p["T"] + 2 * 2.0 * p["T"] * p["D"]),
    tolerance=lambda p: {"x": Tolerance(exact=True, why="a copy of weight rows or zeros: no arithmetic")},
    outputs=("x",), value_modes=("normal", "large", "ties"),
    doc="rows [vocab_start, vocab_start + Vl) of the table; zeros elsewhere",
))
