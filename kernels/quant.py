"""Triton FP8 / FP4 activation quantization and the in-place simulations (reference/quant.py).

Letters: M rows, K the quantized dim, GROUP the scale group (128 / 64 for FP8, 32 for FP4),
GB groups handled by one program. Grid: (M, cdiv(K / GROUP, GB)).

Rounding is done with integer / exact fp32 operations, never through the fp32->fp8 cast: the Triton
interpreter's cast is not round-to-nearest-even (1.0625 -> 1.125, subnormals flushed; checked with
triton 3.6), and building the code bits ourselves makes kernel == reference bit for bit on CPU and GPU.
The @triton.jit helpers here (ue8m0_exp, e4m3_round_code, e2m1_code, fp4_decode_bf16,
fp4_lo_e4m3, fp4_hi_e4m3) are shared with kernels/linear.py and kernels/moe.py.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernelbench.kernels.common import check_device, check_dtype, to_bf16  # noqa: F401 (to_bf16 re-exported)
from kernelbench.registry import register_impl
from kernelbench.tuned_configs import lookup


# ---- shared @triton.jit helpers --------------------------------------------------------------------------
@triton.jit
def ue8m0_exp(amax, FMAX_EXP: tl.constexpr, FMAX_MANT: tl.constexpr):
    """ceil(log2(amax / fmax)) for fmax = (1 + FMAX_MANT / 2^23) * 2^FMAX_EXP, exactly, from the bits of
    amax (a positive normal fp32): amax = m * 2^e, m in [1, 2): e - FMAX_EXP + (m > fmax's mantissa)."""
    b = amax.to(tl.int32, bitcast=True)
    e = ((b >> 23) & 0xFF) - 127
    return e - FMAX_EXP + ((b & 0x7FFFFF) > FMAX_MANT).to(tl.int32)


@triton.jit
def pow2(e):
    """2^e as fp32 for integer e in [-126, 127]."""
    return ((e + 127) << 23).to(tl.float32, bitcast=True)


@triton.jit
def e4m3_round_code(v):
    """v fp32 with |v| <= 448 -> (e4m3 code as int32 0..255, its value fp32), round-to-nearest-even."""
    bits = v.to(tl.int32, bitcast=True)
    sign = (bits >> 31) & 1
    a = tl.abs(v)
    ab = a.to(tl.int32, bitcast=True)
    # normal range (|v| >= 2^-6): keep 3 mantissa bits, RNE on the dropped 20 bits
    rb = (ab + 0x7FFFF + ((ab >> 20) & 1)) & -1048576
    n_code = ((((rb >> 23) & 0xFF) - 120) << 3) | ((rb >> 20) & 7)
    n_val = rb.to(tl.float32, bitcast=True)
    # subnormal range: multiples of 2^-9; adding 1.5 * 2^14 rounds (RNE) to exactly that grid
    s_val = (a + 24576.0) - 24576.0
    s_code = (s_val * 512.0).to(tl.int32)
    small = a < 0.015625
    code = tl.where(small, s_code, n_code) | (sign << 7)
    val = tl.where(small, s_val, n_val)
    return code, tl.where(sign != 0, -val, val)


@triton.jit
def act_quant_e4m3(x, HW_CVT: tl.constexpr):
    """One UE8M0 / e4m3 activation group per row: x (R, GROUP) fp32 (exact bf16 values) -> (codes (R, GROUP)
    float8e4nv, scales (R,) fp32), the reference's arithmetic: s = 2^ceil(log2(max(amax, 1e-4) / 448)),
    code = e4m3_rne(clamp(x / s, +-448)) (x / s is exact: s is a power of two). HW_CVT (compiled code only) rounds
    with the hardware fp32 -> e4m3 conversion (cvt.rn.satfinite, round-to-nearest-even like e4m3_round_code);
    the interpreter's cast does not round to nearest even, so it takes the integer path."""
    amax = tl.maximum(tl.max(tl.abs(x), axis=1), 1e-4)
    se = ue8m0_exp(amax, 8, 0x600000)                                    # 448 = 1.75 * 2^8
    v = tl.minimum(tl.maximum(x * pow2(-se)[:, None], -448.0), 448.0)
    if HW_CVT:
        q = v.to(tl.float8e4nv)
    else:
        q = e4m3_round_code(v)[0].to(tl.uint8).to(tl.float8e4nv, bitcast=True)
    return q, pow2(se)


@triton.jit
def e2m1_code(v):
    """v fp32 with |v| <= 6 -> e2m1 code int32 0..15, round-to-nearest-even (ties to the even code)."""
    a = tl.abs(v)
    c = (a > 0.25).to(tl.int32) + (a >= 0.75).to(tl.int32) + (a > 1.25).to(tl.int32) \
        + (a >= 1.75).to(tl.int32) + (a > 2.5).to(tl.int32) + (a >= 3.5).to(tl.int32) + (a > 5.0).to(tl.int32)
    sign = (v.to(tl.int32, bitcast=True) >> 31) & 1
    return c | (sign << 3)


@triton.jit
def e2m1_value(code):
    """e2m1 code (int32) -> fp32 value."""
    em = code & 7
    e = em >> 1
    m = (em & 1).to(tl.float32)
    mag = tl.where(e == 0, m * 0.5, (1.0 + 0.5 * m) * pow2(e - 1))
    return tl.where((code & 8) != 0, -mag, mag)


@triton.jit
def fp4_simulate_rows(v):
    """v fp32 (G, 32), one FP4 group per row -> bf16, FP4-simulated: the ue8m0 scale of the row's amax (floored
    at 6 * 2^-126), e2m1 round-to-nearest-even, times the scale (kernels/compressor.py, kernels/indexer.py)."""
    amax = tl.maximum(tl.max(tl.abs(v), axis=1), 6.0 * 2.0 ** -126)
    se = ue8m0_exp(amax, 2, 0x400000)                                   # 6 = 1.5 * 2^2
    code = e2m1_code(tl.minimum(tl.maximum(v * pow2(-se)[:, None], -6.0), 6.0))
    return (e2m1_value(code) * pow2(se)[:, None]).to(tl.bfloat16)


@triton.jit
def fp4_decode_bf16(nib, sexp):
    """e2m1 nibble (int32 0..15) times 2^sexp -> bf16, with integer ops only: the bf16 bit pattern is
    (em << 6) + ((sexp + 126) << 7) for em >= 2 (exponent and mantissa bits line up), the exponent alone for
    em == 1 (0.5), 0 for em == 0; the sign moves from bit 3 to bit 15."""
    em = nib & 7
    base = (sexp + 126) << 7
    mag = tl.where(em >= 2, (em << 6) + base, tl.where(em == 1, base, 0))
    bits = mag | ((nib & 8) << 12)
    return bits.to(tl.int16).to(tl.bfloat16, bitcast=True)


@triton.jit
def fp4_lo_e4m3(b):
    """Packed e2m1 bytes (int32 0..255) -> the LOW nibble (even element) as an fp8 e4m3 tensor whose value is
    exactly value(nibble) / 64: e2m1 exponent/mantissa bits 2-0 move to e4m3 bits 4-2 and the sign from bit 3 to
    bit 7 (e2m1 0.5 = 0b001 lands on the e4m3 subnormal 2^-7; checked over all 16 codes in tests/test_linear.py).
    Three integer ops per value; the caller folds the 64 into the scale."""
    return (((b & 0x07) << 2) | ((b & 0x08) << 4)).to(tl.uint8).to(tl.float8e4nv, bitcast=True)


@triton.jit
def fp4_hi_e4m3(b):
    """As fp4_lo_e4m3 for the HIGH nibble (odd element): bits 6-4 -> 4-2, the sign bit 7 stays."""
    return (((b >> 2) & 0x1C) | (b & 0x80)).to(tl.uint8).to(tl.float8e4nv, bitcast=True)


@triton.jit
def fp4_quant_pairs(xe, xo):
    """FP4 quantization (act_quant_fp4's rule) of groups given as their even and odd elements xe, xo (G, half) fp32:
    -> (the even and odd e2m1 codes, int32 0..15; se (G,), each group's scale exponent: the amax floored at
    6 * 2^-126, s = 2^se the smallest power of two with amax / s <= 6). The scaling is exact (a power of two)."""
    amax = tl.maximum(tl.maximum(tl.max(tl.abs(xe), axis=1), tl.max(tl.abs(xo), axis=1)), 6.0 * 2.0 ** -126)
    se = ue8m0_exp(amax, 2, 0x400000)                                    # 6 = 1.5 * 2^2
    inv = pow2(-se)[:, None]
    ce = e2m1_code(tl.minimum(tl.maximum(xe * inv, -6.0), 6.0))
    co = e2m1_code(tl.minimum(tl.maximum(xo * inv, -6.0), 6.0))
    return ce, co, se


# ---- kernels ------------------------------------------------------------------------------------------------
@triton.jit
def _fp8_quant_kernel(x_ptr, q_ptr, s_ptr, y_ptr, K, NG,
                      GROUP: tl.constexpr, GB: tl.constexpr, UE8M0: tl.constexpr, SIMULATE: tl.constexpr):
    # x (M, K) bf16; q (M, K) uint8 (e4m3 bits); s (M, K/GROUP) fp32; y (M, K) bf16 when SIMULATE
    row = tl.program_id(0)
    g = tl.program_id(1) * GB + tl.arange(0, GB)                         # (GB,) group ids
    offs = g[:, None] * GROUP + tl.arange(0, GROUP)[None, :]             # (GB, GROUP)
    gmask = g < NG
    mask = gmask[:, None]
    x = tl.load(x_ptr + row * K + offs, mask=mask, other=0.0).to(tl.float32)
    amax = tl.maximum(tl.max(tl.abs(x), axis=1), 1e-4)                   # (GB,)
    if UE8M0:
        se = ue8m0_exp(amax, 8, 0x600000)                                # 448 = 1.75 * 2^8
        s = pow2(se)
        v = x * pow2(-se)[:, None]                                       # exact
    else:
        s = tl.math.div_rn(amax, 448.0)
        v = tl.math.div_rn(x, s[:, None])
    v = tl.minimum(tl.maximum(v, -448.0), 448.0)
    code, val = e4m3_round_code(v)
    if SIMULATE:
        tl.store(y_ptr + row * K + offs, (val * s[:, None]).to(tl.bfloat16), mask=mask)
    else:
        tl.store(q_ptr + row * K + offs, code.to(tl.uint8), mask=mask)
        tl.store(s_ptr + row * NG + g, s, mask=gmask)


@triton.jit
def _fp4_quant_kernel(x_ptr, q_ptr, s_ptr, y_ptr, K, NG,
                      GROUP: tl.constexpr, GB: tl.constexpr, SIMULATE: tl.constexpr):
    # x (M, K) bf16; q (M, K/2) uint8 (low nibble = even element); s (M, K/GROUP) fp32; y (M, K) bf16
    row = tl.program_id(0)
    HALF: tl.constexpr = GROUP // 2
    g = tl.program_id(1) * GB + tl.arange(0, GB)
    pair = g[:, None] * HALF + tl.arange(0, HALF)[None, :]               # (GB, HALF) byte index in the row
    mask = (g < NG)[:, None]
    xe = tl.load(x_ptr + row * K + 2 * pair, mask=mask, other=0.0).to(tl.float32)
    xo = tl.load(x_ptr + row * K + 2 * pair + 1, mask=mask, other=0.0).to(tl.float32)
    ce, co, se = fp4_quant_pairs(xe, xo)
    if SIMULATE:
        s = pow2(se)[:, None]
        tl.store(y_ptr + row * K + 2 * pair, (e2m1_value(ce) * s).to(tl.bfloat16), mask=mask)
        tl.store(y_ptr + row * K + 2 * pair + 1, (e2m1_value(co) * s).to(tl.bfloat16), mask=mask)
    else:
        tl.store(q_ptr + row * (K // 2) + pair, (ce | (co << 4)).to(tl.uint8), mask=mask)
        tl.store(s_ptr + row * NG + g, pow2(se), mask=g < NG)


# ---- configs and wrappers ------------------------------------------------------------------------------------
def quant_configs(params: dict) -> list[dict]:
    """GB groups per program x warps. One row's 4096 values are 32 groups of 128: GB=8 gives 4 programs."""
    return [{"GB": gb, "num_warps": w} for gb in (1, 2, 4, 8, 16) for w in (1, 2, 4)]


def quant_default(params: dict) -> dict:
    return {"GB": 4, "num_warps": 2}


def _check_x(x: torch.Tensor, group: int, what: str) -> None:
    check_device(x)
    check_dtype("x", x, torch.bfloat16)
    if x.dim() != 2:
        raise ValueError(f"{what}: x must be 2-D [M, K], got shape {tuple(x.shape)}")
    if group <= 0 or x.shape[1] % group or group & (group - 1):
        raise ValueError(f"{what}: group {group} must be a power of two dividing the last dim {x.shape[1]}")


def _launch_fp8(x, group, scale_fmt, simulate, config, op):
    _check_x(x, group, op)
    if scale_fmt not in ("ue8m0", "fp32"):
        raise ValueError(f"{op}: scale_fmt must be 'ue8m0' or 'fp32', got {scale_fmt!r}")
    x = x.contiguous()
    M, K = x.shape
    NG = K // group
    cfg = config or lookup(op, {"M": M, "K": K, "group": group}, quant_default({"M": M, "K": K}))
    q = torch.empty((M, K), dtype=torch.uint8, device=x.device)
    s = torch.empty((M, NG), dtype=torch.float32, device=x.device)
    y = torch.empty((M, K), dtype=torch.bfloat16, device=x.device) if simulate else q
    grid = (M, triton.cdiv(NG, cfg["GB"]))
    _fp8_quant_kernel[grid](x, q, s, y, K, NG, GROUP=group, GB=cfg["GB"], UE8M0=scale_fmt == "ue8m0",
                            SIMULATE=simulate, num_warps=cfg["num_warps"], num_stages=1)
    return (y,) if simulate else (q.view(torch.float8_e4m3fn), s)


@register_impl("act_quant_fp8", "triton", backend="triton", configs=quant_configs, default_config=quant_default,
               kernels=lambda: [_fp8_quant_kernel])
def act_quant_fp8(x, group=128, scale_fmt="ue8m0", config=None):
    return _launch_fp8(x, group, scale_fmt, False, config, "act_quant_fp8")


@register_impl("fp8_simulate", "triton", backend="triton", configs=quant_configs, default_config=quant_default,
               kernels=lambda: [_fp8_quant_kernel])
def fp8_simulate(x, group=64, scale_fmt="ue8m0", config=None):
    return _launch_fp8(x, group, scale_fmt, True, config, "fp8_simulate")[0]


def _launch_fp4(x, group, simulate, config, op):
    _check_x(x, group, op)
    x = x.contiguous()
    M, K = x.shape
    NG = K // group
    cfg = config or lookup(op, {"M": M, "K": K, "group": group}, quant_default({"M": M, "K": K}))
    q = torch.empty((M, K // 2), dtype=torch.uint8, device=x.device)
    s = torch.empty((M, NG), dtype=torch.float32, device=x.device)
    y = torch.empty((M, K), dtype=torch.bfloat16, device=x.device) if simulate else q
    grid = (M, triton.cdiv(NG, cfg["GB"]))
    _fp4_quant_kernel[grid](x, q, s, y, K, NG, GROUP=group, GB=cfg["GB"], SIMULATE=simulate,
                            num_warps=cfg["num_warps"], num_stages=1)
    return y if simulate else (q, s)


@register_impl("act_quant_fp4", "triton", backend="triton", configs=quant_configs, default_config=quant_default,
               kernels=lambda: [_fp4_quant_kernel])
def act_quant_fp4(x, group=32, config=None):
    return _launch_fp4(x, group, False, config, "act_quant_fp4")


@register_impl("fp4_simulate", "triton", backend="triton", configs=quant_configs, default_config=quant_default,
               kernels=lambda: [_fp4_quant_kernel])
def fp4_simulate(x, group=32, config=None):
    return _launch_fp4(x, group, True, config, "fp4_simulate")
