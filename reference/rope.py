"""Rotary position embedding (SPEC 3.4), YaRN frequencies, and the q path's per-head RMS + RoPE.

Letters: T tokens, N rows of a rope input, Hl heads per rank, Dh head dim (512), R rope dims (64).

RoPE rotates interleaved pairs (x[2i], x[2i+1]) as the complex number x[2i] + i x[2i+1] times
e^{i p f_i}; the inverse multiplies by the conjugate. The angle p * f_i is rounded to fp32 in every
compute mode: DeepSeek builds its cos/sin table from `torch.outer(t, freqs)` in fp32, so the fp32
angle is part of the function (at p ~ 1M its rounding moves the angle by up to ~0.03 rad, far more
than any kernel's arithmetic would). cos/sin of that angle and the rotation run in `acc`.
"""
from __future__ import annotations

import math

import torch

from kernelbench.config import ModelConfig
from kernelbench.reference.precision import acc


# YaRN --------------------------------------------------------------------------------------------
def yarn_correction_dim(num_rotations: float, dim: int, base: float, original_seq_len: int) -> float:
    """The (fractional) frequency index i*2 at which a wavelength fits `num_rotations` times into
    the original context: dim * ln(L / (2 pi n)) / (2 ln base)."""
    return dim * math.log(original_seq_len / (num_rotations * 2 * math.pi)) / (2 * math.log(base))


def yarn_correction_range(beta_fast: float, beta_slow: float, dim: int, base: float,
                          original_seq_len: int) -> tuple[int, int]:
    """(low, high) as DeepSeek's `find_correction_range`: floor/ceil of the correction dims, clipped
    to [0, dim - 1]. For dim 64, base 160000, L 65536, beta 32/1 this is (15, 25) (SPEC 3.4)."""
    low = math.floor(yarn_correction_dim(beta_fast, dim, base, original_seq_len))
    high = math.ceil(yarn_correction_dim(beta_slow, dim, base, original_seq_len))
    return max(low, 0), min(high, dim - 1)


def rope_freqs(cfg: ModelConfig, compressed: bool) -> torch.Tensor:
    """freqs [R/2] fp32. SWA layers: f_i = rope_theta^(-2i/R). Compressed layers (CSA/HCA and their
    compressors): theta = compress_rope_theta with YaRN: f_i kept for i <= low, divided by `factor`
    for i >= high, linearly blended between (ramp (i - low) / (high - low) over i < R/2, as DeepSeek's
    `linear_ramp_factor`). Computed as DeepSeek's `precompute_freqs_cis` does, in fp32 torch arithmetic
    on the CPU, so the table is the official one entry for entry (an fp64 computation rounded once
    differs in ~10 of the 32 entries by an ulp, enough to flip RoPE outputs that the FP8 quantisation
    downstream amplifies; issue 11). The fp32 tensor is what every implementation consumes."""
    dim = cfg.rope_head_dim
    base = cfg.compress_rope_theta if compressed else cfg.rope_theta
    freqs = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim))
    if compressed:
        low, high = yarn_correction_range(cfg.yarn_beta_fast, cfg.yarn_beta_slow, dim, base,
                                          cfg.yarn_original_seq_len)
        if high == low:
            high += 0.001
        ramp = ((torch.arange(dim // 2, dtype=torch.float32) - low) / (high - low)).clamp(0, 1)
        smooth = 1 - ramp
        freqs = freqs / cfg.yarn_factor * (1 - smooth) + freqs * smooth
    return freqs


# RoPE --------------------------------------------------------------------------------------------
def rope_angles(positions: torch.Tensor, freqs: torch.Tensor) -> torch.Tensor:
    """[N] int64 x [R/2] fp32 -> angles [N, R/2] fp32: one fp32 multiply, as DeepSeek's table."""
    return positions.to(torch.float32)[:, None] * freqs.to(torch.float32)[None, :]


def apply_rope(x: torch.Tensor, angles: torch.Tensor, inverse: bool = False) -> torch.Tensor:
    """x [N, ..., R] in the compute dtype, angles [N, R/2] -> rotated x, same dtype (no cast)."""
    ang = angles.to(x.dtype).reshape(angles.shape[0], *([1] * (x.dim() - 2)), angles.shape[1])
    cos, sin = torch.cos(ang), torch.sin(ang)
    if inverse:
        sin = -sin
    xr, xi = x[..., 0::2], x[..., 1::2]
    out = torch.empty_like(x)
    out[..., 0::2] = xr * cos - xi * sin
    out[..., 1::2] = xr * sin + xi * cos
    return out


def check_rope_args(name: str, x: torch.Tensor, positions: torch.Tensor, freqs: torch.Tensor, r: int) -> None:
    if freqs.dim() != 1 or 2 * freqs.shape[0] != r:
        raise ValueError(f"{name}: freqs must be [R/2] = [{r // 2}], got {tuple(freqs.shape)}")
    if positions.dim() != 1 or positions.shape[0] != x.shape[0]:
        raise ValueError(f"{name}: positions must be [{x.shape[0]}] (one per row of x), got {tuple(positions.shape)}")
    if positions.dtype.is_floating_point or positions.dtype == torch.bool:
        raise TypeError(f"{name}: positions must be an integer tensor, got {positions.dtype}")


def rope(x: torch.Tensor, positions: torch.Tensor, freqs: torch.Tensor, inverse: bool = False) -> torch.Tensor:
    """x [N, ..., R] bf16, positions [N] int64, freqs [R/2] fp32 -> y, same shape and dtype."""
    if x.dim() < 2:
        raise ValueError(f"rope: x must be [N, ..., R], got shape {tuple(x.shape)}")
    check_rope_args("rope", x, positions, freqs, x.shape[-1])
    return apply_rope(acc(x), rope_angles(positions, freqs), inverse).to(x.dtype)


def check_head_rms_norm_rope(q: torch.Tensor, positions: torch.Tensor, freqs: torch.Tensor) -> int:
    """Validates head_rms_norm_rope's arguments (reference and kernels); returns R, the rotated dims."""
    if q.dim() != 3:
        raise ValueError(f"head_rms_norm_rope: q must be [T, Hl, Dh], got shape {tuple(q.shape)}")
    r = 2 * freqs.shape[0] if freqs.dim() == 1 else -1
    if not 0 < r <= q.shape[-1]:
        raise ValueError(f"head_rms_norm_rope: freqs [R/2] must give 0 < R <= Dh={q.shape[-1]}, "
                         f"got {tuple(freqs.shape)}")
    check_rope_args("head_rms_norm_rope", q, positions, freqs, r)
    return r


def head_rms_norm_rope(q: torch.Tensor, positions: torch.Tensor, freqs: torch.Tensor, eps: float) -> torch.Tensor:
    """q [T, Hl, Dh] bf16 -> per-head weightless RMS over Dh, then RoPE on the last R dims; bf16.

    The official arithmetic: DeepSeek normalizes q in place on the bf16 tensor,
    `q *= rsqrt(q.square().mean(-1, keepdim=True) + eps)`, and torch (CPU) rounds every step to q's
    dtype: q^2; the mean (the rounded squares summed in fp32, divided by Dh, rounded once); the sum
    with eps (eps itself first rounded to q's dtype, as torch casts a Python scalar); rsqrt (fp32
    1/sqrt rounded once, as torch's vectorized loop; its scalar tail, the last count % 32 scales of a
    tensor, rounds sqrt to bf16 first, an artifact not followed here); the product. RoPE then rotates
    the rounded product, rounded once more. These roundings are the contract and stay under every
    compute dtype: `acc` sets only the arithmetic between them (fp32 as torch; in verification's fp64
    each rounded value is the correctly rounded one, which differs from torch's fp32 sum of squares
    only where that sum's own rounding crosses a bf16 boundary). Against fp32-then-cast, the per-head
    scale moves by ~0.2% on average, which the fp8 re-quantisation before wo_b amplifies: the
    rounding matters (issue 11)."""
    r = check_head_rms_norm_rope(q, positions, freqs)

    def rounded(x: torch.Tensor) -> torch.Tensor:    # one step of torch's arithmetic on q's dtype
        return acc(x.to(q.dtype))

    x = acc(q)
    eps_q = float(torch.tensor(eps, dtype=q.dtype))
    mean = rounded(rounded(x.square()).sum(dim=-1, keepdim=True) / q.shape[-1])
    y = rounded(x * rounded(torch.rsqrt(rounded(mean + eps_q))))
    y = torch.cat([y[..., :-r], apply_rope(y[..., -r:], rope_angles(positions, freqs))], dim=-1)
    return y.to(q.dtype)
