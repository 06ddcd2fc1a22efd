"""Op specs: rms_norm and hadamard (reference/norm.py, reference/hadamard.py), plus `draw`, the value
generator the norm/RoPE/mHC/embedding/sampling specs share.

Letters: T tokens, M rows, N width, H heads. Tolerances compare a kernel computing in fp32 against
the reference in fp64 (verify) with a bf16 output: a correct kernel differs from the exact result
by its fp32 arithmetic (~1e-6 relative) and then the single bf16 rounding can land on the other
side of a rounding boundary: at most 1 bf16 ulp, which is <= 2^-7 of the value. Hence rtol = 2^-7
everywhere below, a small atol only where sums can cancel, and rel_fro = 2^-8 (a kernel that
rounds intermediates to bf16 or drops the eps shows up there first).
"""
from __future__ import annotations

import torch
from hypothesis import strategies as st

from kernelbench.config import ShapeSet
from kernelbench.reference.hadamard import hadamard
from kernelbench.reference.norm import rms_norm
from kernelbench.registry import Cost, OpSpec, Tolerance, register_op

BF16_RTOL = 2.0 ** -7
REL_FRO = 2.0 ** -8


def draw(shape, gen: torch.Generator, values: str = "normal", dtype=torch.bfloat16,
         device="cpu", scale: float = 1.0) -> torch.Tensor:
    """Non-zero test data on the CPU generator, then moved. Modes: normal N(0,1); outliers (1% of
    entries x 64); tiny (x 1e-3); large (x 1e3); ties (multiples of 0.5 in [-4, 4]: exact ties for
    argmax and repeated values for reductions, zeros removed)."""
    x = torch.randn(shape, generator=gen, dtype=torch.float32)
    if values == "outliers":
        mask = torch.rand(shape, generator=gen) < 0.01
        x = torch.where(mask, x * 64, x)
    elif values == "tiny":
        x = x * 1e-3
    elif values == "large":
        x = x * 1e3
    elif values == "ties":
        x = (x * 2).round().clamp(-8, 8) / 2
        x = torch.where(x == 0, torch.full_like(x, 0.5), x)
    elif values != "normal":
        raise ValueError(f"unknown value mode {values!r}")
    return (x * scale).to(device=device, dtype=dtype)


def unique_cases(cases: list[dict]) -> list[dict]:
    """The cases without repeats, first occurrence kept (shape sets repeat a shape across batches/configs)."""
    out = []
    for c in cases:
        if c not in out:
            out.append(c)
    return out


# rms_norm ----------------------------------------------------------------------------------------
def _rms_cases(ss: ShapeSet) -> list[dict]:
    c = ss.config
    # attn_norm/ffn_norm/final norm on [T, D]; q_norm on [T, q_lora_rank]; kv_norm on [T, head_dim]
    return unique_cases([{"M": t, "N": n} for t in ss.batches for n in (c.dim, c.q_lora_rank, c.head_dim)])


def _rms_inputs(p, gen, device, values):
    return {"x": draw((p["M"], p["N"]), gen, values, device=device),
            "weight": (1 + 0.25 * draw((p["N"],), gen, "normal")).to(device=device, dtype=torch.bfloat16),
            "eps": 1e-6}


register_op(OpSpec(
    name="rms_norm", family="norm", reference=rms_norm, make_inputs=_rms_inputs, cases=_rms_cases,
    batch_key="M",
    strategy=lambda: st.fixed_dictionaries({"M": st.integers(1, 5), "N": st.sampled_from([8, 64, 100, 256, 520])}),
    cost=lambda p: Cost(flops=4.0 * p["M"] * p["N"], bytes=2.0 * (2 * p["M"] * p["N"] + p["N"])),
    tolerance=lambda p: {"y": Tolerance(atol=1e-6, rtol=BF16_RTOL, rel_fro=REL_FRO,
                                        why="products only (no cancellation): fp32 error ~1e-6 rel, then one "
                                            "bf16 rounding that may flip 1 ulp (<= 2^-7 rel)")},
    outputs=("y",), value_modes=("normal", "outliers", "tiny", "large"),
    doc="y = w * x * rsqrt(mean(x^2) + eps), fp32 math, bf16 out",
))


# hadamard ----------------------------------------------------------------------------------------
def _had_cases(ss: ShapeSet) -> list[dict]:
    c = ss.config
    hi = c.index_n_heads // ss.tp
    # indexer q [T, Hi/TP, 128]; compressor entries [T, 1, 128]
    return unique_cases([{"T": t, "H": h} for t in ss.batches for h in (hi, 1)])


def _had_inputs(p, gen, device, values):
    return {"x": draw((p["T"], p["H"], 128), gen, values, device=device)}


register_op(OpSpec(
    name="hadamard", family="norm", reference=hadamard, make_inputs=_had_inputs, cases=_had_cases,
    batch_key="T",
    strategy=lambda: st.fixed_dictionaries({"T": st.integers(1, 4), "H": st.integers(1, 5)}),
    cost=lambda p: Cost(flops=2.0 * 128 * 128 * p["T"] * p["H"], bytes=2.0 * 2 * 128 * p["T"] * p["H"]),
    tolerance=lambda p: {"y": Tolerance(atol=1e-4, rtol=BF16_RTOL, rel_fro=REL_FRO,
                                        why="128-term signed sum in fp32: |err| <= ~128 * 2^-24 * max|x| "
                                            "(~1e-5 for N(0,1) data; atol covers cancellation to ~0), then one "
                                            "bf16 rounding (<= 2^-7 rel)")},
    outputs=("y",), value_modes=("normal", "outliers", "ties"),
    doc="x @ H_128 / sqrt(128) (Sylvester), bf16",
))
