"""Op spec: sample (reference/sampling.py), greedy and Gumbel-max with a given Exp(1) noise tensor.

Letters: T tokens, V vocab. Half the rows (alternating) are greedy (temperature 0), the others use a
temperature in [0.5, 1.5]. Logits are scaled x3 so the distribution is peaked like a real model's.
"""
from __future__ import annotations

import torch
from hypothesis import strategies as st

from kernelbench.config import ShapeSet
from kernelbench.ops.norm import draw, unique_cases
from kernelbench.reference.sampling import sample
from kernelbench.registry import Cost, OpSpec, Tolerance, register_op


def _cases(ss: ShapeSet) -> list[dict]:
    return unique_cases([{"T": t, "V": ss.config.vocab_size} for t in ss.batches])


def _inputs(p, gen, device, values):
    t, v = p["T"], p["V"]
    temp = 0.5 + torch.rand(t, generator=gen)
    temp[::2] = 0.0
    noise = torch.empty(t, v).exponential_(1.0, generator=gen)
    return {"logits": draw((t, v), gen, values, torch.float32, device, scale=3.0),
            "temperature": temp.to(device), "noise": noise.to(device)}


register_op(OpSpec(
    name="sample", family="sampling", reference=sample, make_inputs=_inputs, cases=_cases,
    batch_key="T",
    strategy=lambda: st.fixed_dictionaries({"T": st.integers(1, 5), "V": st.sampled_from([1, 7, 100, 1000, 5000])}),
    cost=lambda p: Cost(flops=4.0 * p["T"] * p["V"], bytes=8.0 * p["T"] * p["V"] + 4.0 * p["T"] + 8.0 * p["T"]),
    tolerance=lambda p: {"ids": Tolerance(exact=True, why="an index: a kernel that orders the same fp32 scores "
                                          "with lowest-index tie breaking gives the same id; a flip needs two "
                                          "scores within ~1e-7 relative, probability ~1e-6 per row")},
    outputs=("ids",), value_modes=("normal", "ties", "large"),
    doc="argmax(logits) where temperature == 0, else argmax(softmax(logits / t) / noise)",
))
