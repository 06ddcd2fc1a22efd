"""FP8 / FP4 quantization (SPEC section 2): activation quantizers, the in-place simulations, and the
weight quantizers the checkpoint writer and tests use.

Letters: M rows, K (or N) the quantized last dim, Gk = K / group.
Formats:
    e4m3  torch.float8_e4m3fn, max 448, real RNE rounding through torch's cast.
    e2m1  4-bit codes 0..15 (E2M1_VALUES), packed two per uint8, LOW nibble = even element.
    UE8M0 power-of-two scale 2^ceil(log2(amax / fmax)); stored as torch.float8_e8m0fnu for weights,
          as the fp32 value for activations (docs/OPS.md).
"""
from __future__ import annotations

import torch

from kernelbench.reference.precision import acc

FP8_MAX = 448.0
FP4_MAX = 6.0
FP8_AMAX_FLOOR = 1e-4
FP4_AMAX_FLOOR = 6.0 * 2.0 ** -126
E8M0 = torch.float8_e8m0fnu
E4M3 = torch.float8_e4m3fn

# e2m1 code -> value. Codes 8..15 are the negated 0..7 (code 8 is -0).
E2M1_VALUES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0)
# Round-to-nearest-even on the magnitude grid: boundary between code c and c+1, and whether a tie goes
# up (c odd, so c+1 is the even code) or stays down (c even).
_E2M1_BOUNDS = ((0.25, False), (0.75, True), (1.25, False), (1.75, True), (2.5, False), (3.5, True), (5.0, False))


def e2m1_table(device="cpu", dtype=torch.float32) -> torch.Tensor:
    return torch.tensor(E2M1_VALUES, device=device, dtype=dtype)


# ---- UE8M0 helpers --------------------------------------------------------------------------------
def pow2_ceil_exponent(y: torch.Tensor) -> torch.Tensor:
    """ceil(log2(y)) exactly, for positive finite y (int32). frexp: y = m * 2^e, m in [0.5, 1)."""
    m, e = torch.frexp(y)
    return torch.where(m == 0.5, e - 1, e).to(torch.int32)


def ue8m0_scale(amax: torch.Tensor, fmax: float) -> torch.Tensor:
    """2^ceil(log2(amax / fmax)) in the dtype of amax. amax / fmax for a bf16-exact amax never rounds
    across a power of two (its distance from one is >= 2^-9 relative), so the result is exact."""
    return torch.ldexp(torch.ones_like(amax), pow2_ceil_exponent(amax / fmax).to(amax.dtype))


def to_e8m0(s: torch.Tensor) -> torch.Tensor:
    """fp32/fp64 powers of two -> float8_e8m0fnu (exact); refuses anything else."""
    sf = s.float()
    m, _ = torch.frexp(sf)
    if not bool(((m == 0.5) & (sf > 0)).all()):
        raise ValueError("to_e8m0: every scale must be a positive power of two")
    return sf.to(E8M0)


def e8m0_to_float(s: torch.Tensor) -> torch.Tensor:
    """float8_e8m0fnu -> the scale value (in the reference compute dtype)."""
    return acc(s.float())


def e8m0_exponent(s: torch.Tensor) -> torch.Tensor:
    """Unbiased exponent of a float8_e8m0fnu tensor (int32)."""
    return s.view(torch.uint8).to(torch.int32) - 127


# ---- e4m3 / e2m1 rounding ---------------------------------------------------------------------------
def round_e4m3(v: torch.Tensor) -> torch.Tensor:
    """Round already-clamped values (|v| <= 448) to e4m3 codes (RNE, subnormals included)."""
    return v.to(E4M3)


def e2m1_encode(v: torch.Tensor) -> torch.Tensor:
    """Round-to-nearest-even of clamped values (|v| <= 6) to e2m1 codes (uint8 0..15)."""
    a = v.abs()
    code = torch.zeros(v.shape, dtype=torch.int32, device=v.device)
    for bound, tie_up in _E2M1_BOUNDS:
        code += (a >= bound if tie_up else a > bound).to(torch.int32)
    code = torch.where(torch.signbit(v), code + 8, code)
    return code.to(torch.uint8)


def e2m1_decode(codes: torch.Tensor) -> torch.Tensor:
    """uint8 codes 0..15 -> values (reference compute dtype)."""
    return e2m1_table(codes.device, torch.float64)[codes.long()].to(acc(torch.zeros(())).dtype)


def pack_fp4(codes: torch.Tensor) -> torch.Tensor:
    """(..., K) codes -> (..., K/2) uint8, low nibble = even element."""
    if codes.shape[-1] % 2:
        raise ValueError(f"pack_fp4: last dim {codes.shape[-1]} must be even")
    c = codes.to(torch.uint8)
    return c[..., 0::2] | (c[..., 1::2] << 4)


def unpack_fp4(packed: torch.Tensor) -> torch.Tensor:
    """(..., K/2) uint8 -> (..., K) codes."""
    if packed.dtype != torch.uint8:
        raise TypeError(f"packed fp4 must be uint8, got {packed.dtype}")
    lo, hi = packed & 0xF, packed >> 4
    return torch.stack((lo, hi), dim=-1).flatten(-2)


def _check_act(x: torch.Tensor, group: int, what: str) -> None:
    if x.dtype != torch.bfloat16:
        raise TypeError(f"{what}: x must be torch.bfloat16, got {x.dtype}")
    if x.dim() != 2:
        raise ValueError(f"{what}: x must be 2-D [M, K], got shape {tuple(x.shape)}")
    if group <= 0 or x.shape[1] % group:
        raise ValueError(f"{what}: last dim {x.shape[1]} must be a multiple of group {group}")


# ---- activation quantizers (docs/OPS.md) --------------------------------------------------------------
def _fp8_groups(x: torch.Tensor, group: int, scale_fmt: str):
    M, K = x.shape
    xg = acc(x).view(M, K // group, group)                       # (M, Gk, group)
    amax = xg.abs().amax(-1).clamp_min(FP8_AMAX_FLOOR)            # (M, Gk)
    if scale_fmt == "ue8m0":
        s = ue8m0_scale(amax, FP8_MAX)
    elif scale_fmt == "fp32":
        s = (amax.float() / FP8_MAX).to(amax.dtype)               # the fp32 scale value itself
    else:
        raise ValueError(f"scale_fmt must be 'ue8m0' or 'fp32', got {scale_fmt!r}")
    q = round_e4m3((xg / s[..., None]).clamp(-FP8_MAX, FP8_MAX))  # (M, Gk, group) e4m3
    return q.view(M, K), s


def act_quant_fp8(x, group=128, scale_fmt="ue8m0"):
    """x (M, K) bf16 -> q (M, K) e4m3, s (M, K/group) fp32 with x ~= q * s per group."""
    _check_act(x, group, "act_quant_fp8")
    q, s = _fp8_groups(x, group, scale_fmt)
    return q, s.float()


def fp8_simulate(x, group=64, scale_fmt="ue8m0"):
    """x (M, N) bf16 -> bf16(e4m3(x / s) * s), the quantization-aware simulation."""
    _check_act(x, group, "fp8_simulate")
    M, N = x.shape
    q, s = _fp8_groups(x, group, scale_fmt)
    y = acc(q).view(M, N // group, group) * s[..., None]
    return y.view(M, N).to(torch.bfloat16)


def _fp4_groups(x: torch.Tensor, group: int):
    M, K = x.shape
    xg = acc(x).view(M, K // group, group)                        # (M, Gk, group)
    amax = xg.abs().amax(-1).clamp_min(FP4_AMAX_FLOOR)
    s = ue8m0_scale(amax, FP4_MAX)                                # (M, Gk)
    codes = e2m1_encode((xg / s[..., None]).clamp(-FP4_MAX, FP4_MAX))
    return codes.view(M, K), s


def act_quant_fp4(x, group=32):
    """x (M, K) bf16 -> q (M, K/2) uint8 packed e2m1, s (M, K/group) fp32 powers of two."""
    _check_act(x, group, "act_quant_fp4")
    codes, s = _fp4_groups(x, group)
    return pack_fp4(codes), s.float()


def fp4_simulate(x, group=32):
    """x (M, N) bf16 -> bf16(e2m1(x / s) * s)."""
    _check_act(x, group, "fp4_simulate")
    M, N = x.shape
    codes, s = _fp4_groups(x, group)
    y = e2m1_decode(codes).view(M, N // group, group) * s[..., None]
    return y.view(M, N).to(torch.bfloat16)


# ---- weights (checkpoint format) ----------------------------------------------------------------------
def quant_fp8_weight(w: torch.Tensor, block: int = 128):
    """w (N, K) float -> q (N, K) e4m3, s (ceil(N/block), K/block) e8m0; W ~= q * s[n//block, k//block]."""
    if w.dim() != 2 or w.shape[1] % block:
        raise ValueError(f"quant_fp8_weight: w must be [N, K] with K % {block} == 0, got {tuple(w.shape)}")
    N, K = w.shape
    nb = -(-N // block)
    wf = torch.zeros(nb * block, K, dtype=torch.float64, device=w.device)
    wf[:N] = w.double()
    blocks = wf.view(nb, block, K // block, block)                            # (Nb, 128, Kb, 128)
    amax = blocks.abs().amax(dim=(1, 3)).clamp_min(FP8_AMAX_FLOOR)            # (Nb, Kb)
    s = ue8m0_scale(amax, FP8_MAX)
    q = round_e4m3((blocks / s[:, None, :, None]).clamp(-FP8_MAX, FP8_MAX))
    return q.view(nb * block, K)[:N].contiguous(), to_e8m0(s)


def block_scales_full(s: torch.Tensor, n: int, k: int, block: int = 128) -> torch.Tensor:
    """Per-(block x block) scales s (..., ceil(n/block), ceil(k/block)) -> one per element (..., n, k)."""
    return s.repeat_interleave(block, -2)[..., :n, :].repeat_interleave(block, -1)[..., :k]


def dequant_fp8_weight(q: torch.Tensor, s: torch.Tensor, block: int = 128) -> torch.Tensor:
    """q (N, K) e4m3, s (ceil(N/block), K/block) e8m0 -> W (N, K) in the reference compute dtype."""
    N, K = q.shape
    if s.shape != (-(-N // block), K // block) or K % block:
        raise ValueError(f"dequant_fp8_weight: scale shape {tuple(s.shape)} does not fit weight {tuple(q.shape)}")
    return acc(q) * block_scales_full(e8m0_to_float(s), N, K, block)


def quant_fp4_weight(w: torch.Tensor, group: int = 32):
    """w (N, K) float -> packed (N, K/2) uint8, s (N, K/group) e8m0."""
    if w.dim() != 2 or w.shape[1] % group:
        raise ValueError(f"quant_fp4_weight: w must be [N, K] with K % {group} == 0, got {tuple(w.shape)}")
    N, K = w.shape
    wg = w.double().view(N, K // group, group)
    amax = wg.abs().amax(-1).clamp_min(FP4_AMAX_FLOOR)
    s = ue8m0_scale(amax, FP4_MAX)
    codes = e2m1_encode((wg / s[..., None]).clamp(-FP4_MAX, FP4_MAX)).view(N, K)
    return pack_fp4(codes), to_e8m0(s)


def dequant_fp4_weight(packed: torch.Tensor, s: torch.Tensor, group: int = 32) -> torch.Tensor:
    """packed (..., N, K/2) uint8, s (..., N, K/group) e8m0 -> W (..., N, K) (reference compute dtype)."""
    codes = unpack_fp4(packed)
    K = codes.shape[-1]
    if s.shape[-1] * group != K or s.shape[:-1] != codes.shape[:-1]:
        raise ValueError(f"dequant_fp4_weight: scale shape {tuple(s.shape)} does not fit weight {tuple(packed.shape)}")
    return e2m1_decode(codes) * e8m0_to_float(s).repeat_interleave(group, -1)
