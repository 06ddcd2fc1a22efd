"""Op specs: FP8 / FP4 activation quantization and the in-place simulations (reference/quant.py).

Also the input helpers the linear and MoE specs share: activation values by mode, and random
checkpoint-format FP8 / FP4 weights drawn directly as codes + scales (quantizing a real-size fp32
weight on the CPU would take minutes).
"""
from __future__ import annotations

import math

import torch
from hypothesis import strategies as st

from kernelbench.config import ShapeSet, divide
from kernelbench.reference import quant as Q
from kernelbench.registry import Cost, OpSpec, Tolerance, register_op
from kernelbench.harness.testing import randn
from kernelbench.ops.norm import unique_cases

# ---- shared input helpers ----------------------------------------------------------------------------
_FP8_GRID = torch.tensor(sorted({float(v) for v in torch.arange(0, 127, dtype=torch.uint8)
                                 .view(torch.float8_e4m3fn).float().tolist()}))     # e4m3 magnitudes 0..448
_FP4_MIDS = torch.tensor([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0])


def act_values(shape, gen: torch.Generator, values: str, group: int = 128, fmt: str = "fp8") -> torch.Tensor:
    """Activations (bf16, CPU) for a value mode:
    normal: N(0, 1); outliers: N(0,1) with ~0.5% of entries x300 (one group's scale set by a spike);
    tiny: every other group near zero (1e-7, under the amax floor) and the rest N(0, 1e-3);
    ties: per group one element at the format max (scale 1) and the rest exact midpoints between
    adjacent codes (the rounding tie cases); large: N(0, 1e4);
    boundary: the format's edges, one pattern per group in turn (`boundary_values`)."""
    M, K = shape[0], math.prod(shape[1:])
    if values == "normal":
        x = randn((M, K), gen, dtype=torch.float32)
    elif values == "outliers":
        x = randn((M, K), gen, dtype=torch.float32)
        spikes = torch.rand((M, K), generator=gen) < 0.005
        x = torch.where(spikes, x * 300.0, x)
    elif values == "tiny":
        x = randn((M, K), gen, dtype=torch.float32) * 1e-3
        g = x.view(M, K // group, group) if K % group == 0 else x.view(M, 1, K)
        g[:, ::2] *= 1e-4
    elif values == "ties":
        if fmt == "fp8":
            mids = (_FP8_GRID[1:] + _FP8_GRID[:-1]) / 2
            top = 448.0
        else:
            mids, top = _FP4_MIDS, 6.0
        pick = torch.randint(0, mids.numel(), (M, K), generator=gen)
        sign = torch.randint(0, 2, (M, K), generator=gen) * 2 - 1
        x = mids[pick] * sign
        g = x.view(M, -1, group) if K % group == 0 else x.view(M, 1, K)
        g[:, :, 0] = top
    elif values == "large":
        x = randn((M, K), gen, dtype=torch.float32) * 1e4
    elif values == "boundary":
        x = boundary_values(M, K, gen, group, fmt)
    else:
        raise ValueError(f"unknown value mode {values!r}")
    return x.to(torch.bfloat16).view(shape)


BOUNDARY_PATTERNS = ("max_pow2", "max_pow2_above", "max_pow2_below", "midpoints_offgrid_max", "amax_floor")


def boundary_values(M: int, K: int, gen: torch.Generator, group: int, fmt: str = "fp8") -> torch.Tensor:
    """fp32 (M, K), bf16-exact, drawing the quantization format's edges on purpose. Group i of a row uses
    pattern (i + row) % 5 of BOUNDARY_PATTERNS, with k a random power of two per group:
      max_pow2:        amax exactly fmax * 2^k (448 * 2^k e4m3, 6 * 2^k e2m1): amax / fmax is a power of two,
                       where ceil(log2) and floor(log2) + 1 disagree;
      max_pow2_above / _below: amax one bf16 step above / below fmax * 2^k;
      each of these three puts the other values half normal, half in the format's subnormal range at that
      scale (|x / s| < 2^-6 for e4m3, < 1 for e2m1), beside the normal maximum;
      midpoints_offgrid_max: amax off the code grid (300 * 2^k e4m3, 5 * 2^k e2m1: scale 2^k) and the rest
                       exact midpoints between adjacent codes at that scale (rounding ties);
      amax_floor:      the UE8M0 scale's low end: amax at the amax floor of the format (the smallest scale
                       the quantizer makes), values one bf16 step either side of it.
    The UE8M0 top (2^127) is out of reach of bf16 inputs (448 * 2^119 > bf16 max), so it is not drawn."""
    from kernelbench.reference.quant import FP4_AMAX_FLOOR, FP8_AMAX_FLOOR
    fp8 = fmt == "fp8"
    fmax, floor = (448.0, FP8_AMAX_FLOOR) if fp8 else (6.0, FP4_AMAX_FLOOR)
    sub_top = 2.0 ** -6 if fp8 else 1.0               # |x / s| below this is a subnormal code
    grid = _FP8_GRID if fp8 else torch.tensor([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0])
    mids = (grid[1:] + grid[:-1]) / 2
    G = group if K % group == 0 else K
    x = torch.empty(M, K // G, G)
    for r in range(M):
        for g in range(K // G):
            pat = BOUNDARY_PATTERNS[(g + r) % len(BOUNDARY_PATTERNS)]
            k = int(torch.randint(-6, 7, (1,), generator=gen) if fp8 else torch.randint(-3, 4, (1,), generator=gen))
            s = 2.0 ** k
            sign = torch.randint(0, 2, (G,), generator=gen).float() * 2 - 1
            if pat == "midpoints_offgrid_max":
                v = mids[torch.randint(0, mids.numel(), (G,), generator=gen)] * s * sign
                top = (300.0 if fp8 else 5.0) * s
            elif pat == "amax_floor":
                v = floor * (0.25 + 0.5 * torch.rand(G, generator=gen)) * sign
                top = floor
            else:
                normal = torch.rand(G, generator=gen) * fmax * s
                sub = torch.rand(G, generator=gen) * sub_top * s
                v = torch.where(torch.arange(G) % 2 == 0, normal, sub) * sign
                top = fmax * s
            v = v.to(torch.bfloat16).float()
            i = int(torch.randint(0, G, (1,), generator=gen))
            t = torch.tensor(top).to(torch.bfloat16)
            if pat == "max_pow2_above" or (pat == "amax_floor" and g % 2):
                t = torch.nextafter(t, torch.tensor(float("inf"), dtype=torch.bfloat16))
            elif pat == "max_pow2_below":
                t = torch.nextafter(t, torch.tensor(0.0, dtype=torch.bfloat16))
            v[i] = float(t) * (1 if i % 2 == 0 else -1)
            x[r, g] = v
    return x.view(M, K)


def fp8_weight(N: int, K: int, gen: torch.Generator, n_mats: int | None = None):
    """Random checkpoint-format FP8 weight(s): codes e4m3 (N, K), scales e8m0 (ceil(N/128), ceil(K/128)), rms ~
    1/sqrt(K)."""
    lead = () if n_mats is None else (n_mats,)
    codes = (torch.randn(lead + (N, K), generator=gen) * 64).clamp(-448, 448).to(torch.float8_e4m3fn)
    base = -round(math.log2(64 * math.sqrt(K)))
    e = torch.randint(-1, 2, lead + (-(-N // 128), -(-K // 128)), generator=gen) + base
    return codes, torch.ldexp(torch.ones(e.shape), e.float()).to(torch.float8_e8m0fnu)


def fp8_dequantised(N: int, K: int, gen: torch.Generator, n_mats: int | None = None) -> torch.Tensor:
    """A random checkpoint FP8 weight (fp8_weight) dequantised to bf16 (exact: e4m3 x a power of two per 128 x 128
    block), as DeepSeek's reference loads wo_a (SPEC 2)."""
    codes, s = fp8_weight(N, K, gen, n_mats)
    return (codes.float() * Q.block_scales_full(s.float(), N, K)).to(torch.bfloat16)


def fp4_weight(N: int, K: int, gen: torch.Generator, n_mats: int | None = None):
    """Random checkpoint-format FP4 weight(s): packed uint8 (N, K/2) uniform codes, scales e8m0 (N, K/32)."""
    lead = () if n_mats is None else (n_mats,)
    packed = torch.randint(0, 256, lead + (N, K // 2), generator=gen, dtype=torch.uint8)
    base = -round(math.log2(2.9 * math.sqrt(K)))          # uniform e2m1 codes have rms ~2.9
    e = torch.randint(-1, 2, lead + (N, K // 32), generator=gen) + base
    return packed, torch.ldexp(torch.ones(e.shape), e.float()).to(torch.float8_e8m0fnu)


# ---- act_quant_fp8 -------------------------------------------------------------------------------------
def _fp8_rows(ss: ShapeSet) -> list[tuple[int, int]]:
    """(M, K) activation shapes that get fp8-quantized in a decode step (before each fp8 GEMM)."""
    c = ss.config
    out = []
    for T in ss.batches:
        out += [(T, c.dim), (T, c.q_lora_rank), (T, divide(c.o_groups * c.o_lora_rank, ss.tp)), (T, c.moe_inter_dim)]
    return out


def _aq8_make(p, gen, device, values):
    x = act_values((p["M"], p["K"]), gen, values, p["group"], "fp8")
    return {"x": x.to(device), "group": p["group"], "scale_fmt": p["scale_fmt"]}


def _aq8_cases(ss):
    return unique_cases([{"M": M, "K": K, "group": 128, "scale_fmt": "ue8m0"} for M, K in _fp8_rows(ss)]
                  + [{"M": ss.batches[-1], "K": ss.config.dim, "group": 128, "scale_fmt": "fp32"}])


def _aq8_strategy():
    return st.fixed_dictionaries({"M": st.integers(1, 6), "K": st.sampled_from([64, 128, 256, 384]),
                                  "group": st.sampled_from([64, 128]),
                                  "scale_fmt": st.sampled_from(["ue8m0", "fp32"])}).filter(lambda p: p["K"] % p["group"] == 0)


def _aq8_cost(p):
    n = p["M"] * p["K"]
    return Cost(flops=3 * n, bytes=2 * n + n + 4 * n // p["group"])


def _aq8_tol(p):
    if p["scale_fmt"] == "ue8m0":
        why = ("UE8M0: amax is exact, the scale a power of two, x/s exact; the only rounding is the one e4m3 "
               "RNE cast, identical in kernel and reference: codes and scales must match bit for bit.")
        return {"q": Tolerance(exact=True, why=why), "s": Tolerance(exact=True, why=why)}
    why = ("fp32 scale amax/448 is one correctly rounded division (exact match expected); x/s is an fp32 "
           "division whose last-bit difference can flip an e4m3 code at a rounding tie: allow one code "
           "step (2^-3 relative) on 0.1% of elements.")
    return {"q": Tolerance(atol=0.0, rtol=2 ** -3, max_mismatch_frac=1e-3, why=why),
            "s": Tolerance(rtol=2 ** -23, why=why)}


register_op(OpSpec(
    name="act_quant_fp8", family="quant", reference=Q.act_quant_fp8, make_inputs=_aq8_make, cases=_aq8_cases,
    batch_key="M",
    strategy=_aq8_strategy, cost=_aq8_cost, tolerance=_aq8_tol, outputs=("q", "s"),
    value_modes=("normal", "outliers", "tiny", "ties", "large", "boundary"),
    doc="Per-row, per-group FP8 e4m3 activation quantization with UE8M0 or fp32 scales."))


# ---- fp8_simulate ----------------------------------------------------------------------------------------
def _sim8_make(p, gen, device, values):
    x = act_values((p["M"], p["N"]), gen, values, p["group"], "fp8")
    return {"x": x.to(device), "group": p["group"], "scale_fmt": p["scale_fmt"]}


def _sim8_cases(ss):
    c = ss.config
    nope = c.head_dim - c.rope_head_dim
    # kv_write: one new kv row per token; compressor: up to one emitted entry per token.
    return unique_cases([{"M": T, "N": nope, "group": c.kv_fp8_group, "scale_fmt": "ue8m0"} for T in ss.batches])


def _sim8_strategy():
    return st.fixed_dictionaries({"M": st.integers(1, 6), "N": st.sampled_from([64, 128, 448]),
                                  "group": st.just(64), "scale_fmt": st.sampled_from(["ue8m0", "fp32"])})


def _sim8_cost(p):
    n = p["M"] * p["N"]
    return Cost(flops=4 * n, bytes=4 * n)


def _sim8_tol(p):
    if p["scale_fmt"] == "ue8m0":
        return {"y": Tolerance(exact=True, why="e4m3 code times a power of two is exact in bf16; same codes as "
                                               "the reference (see act_quant_fp8) => identical bits.")}
    return {"y": Tolerance(rtol=2 ** -3, max_mismatch_frac=1e-3,
                           why="fp32 scale: x/s and q*s round in fp32; a code can flip at a tie (one e4m3 step, "
                               "2^-3 relative) and the product then rounds to bf16 (2^-9).")}


register_op(OpSpec(
    name="fp8_simulate", family="quant", reference=Q.fp8_simulate, make_inputs=_sim8_make, cases=_sim8_cases,
    batch_key="M",
    strategy=_sim8_strategy, cost=_sim8_cost, tolerance=_sim8_tol, outputs=("y",),
    value_modes=("normal", "outliers", "tiny", "ties", "large", "boundary"),
    doc="bf16(dequant(quant_e4m3(x))) per group: the KV-cache FP8 simulation."))


# ---- act_quant_fp4 / fp4_simulate --------------------------------------------------------------------------
def _fp4_cases(ss, letter):
    c = ss.config
    hi = divide(c.index_n_heads, ss.tp)
    # indexer queries (T * Hi rows of 128) and indexer-compressor entries (T rows of 128).
    return unique_cases([{"M": T * hi, letter: c.index_head_dim, "group": c.fp4_group} for T in ss.batches]
                  + [{"M": T, letter: c.index_head_dim, "group": c.fp4_group} for T in ss.batches])


def _fp4_strategy(letter):
    return st.fixed_dictionaries({"M": st.integers(1, 8), letter: st.sampled_from([32, 64, 128, 256]),
                                  "group": st.just(32)})


def _aq4_make(p, gen, device, values):
    return {"x": act_values((p["M"], p["K"]), gen, values, p["group"], "fp4").to(device), "group": p["group"]}


def _sim4_make(p, gen, device, values):
    return {"x": act_values((p["M"], p["N"]), gen, values, p["group"], "fp4").to(device), "group": p["group"]}


_FP4_WHY = ("UE8M0 scale from an exact amax, x/s exact (power of two), e2m1 RNE by comparisons against "
            "exact midpoints: no rounding differs between kernel and reference => bitwise.")


register_op(OpSpec(
    name="act_quant_fp4", family="quant", reference=Q.act_quant_fp4, make_inputs=_aq4_make,
    batch_key="M",
    cases=lambda ss: _fp4_cases(ss, "K"), strategy=lambda: _fp4_strategy("K"),
    cost=lambda p: Cost(flops=10 * p["M"] * p["K"], bytes=2 * p["M"] * p["K"] + p["M"] * p["K"] // 2
                        + 4 * p["M"] * p["K"] // p["group"]),
    tolerance=lambda p: {"q": Tolerance(exact=True, why=_FP4_WHY), "s": Tolerance(exact=True, why=_FP4_WHY)},
    outputs=("q", "s"), value_modes=("normal", "outliers", "tiny", "ties", "large", "boundary"),
    doc="Per-group-32 e2m1 activation quantization, UE8M0 scales, two codes per byte (low nibble even)."))

register_op(OpSpec(
    name="fp4_simulate", family="quant", reference=Q.fp4_simulate, make_inputs=_sim4_make,
    batch_key="M",
    cases=lambda ss: _fp4_cases(ss, "N"), strategy=lambda: _fp4_strategy("N"),
    cost=lambda p: Cost(flops=12 * p["M"] * p["N"], bytes=4 * p["M"] * p["N"]),
    tolerance=lambda p: {"y": Tolerance(exact=True, why=_FP4_WHY + " q*s is exact in bf16.")},
    outputs=("y",), value_modes=("normal", "outliers", "tiny", "ties", "large", "boundary"),
    doc="bf16(e2m1(x/s)*s) per group of 32: the indexer's FP4 simulation."))
