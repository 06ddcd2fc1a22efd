"""RoPE (interleaved pairs, with its inverse) and the q path's fused per-head RMS + RoPE.

Legend: N rows (tokens), H rows per token (heads; any middle dims flattened), R rope dims,
R2 = R/2 pairs, T tokens, Hl heads per rank, Dh head dim, BLOCK_H heads per program.

The angle is one fp32 multiply p * f_i, exactly as the reference (and DeepSeek's fp32 cos/sin
table); cos/sin (`common.sincos`) and the rotation run in fp32; one bf16 rounding at the store. Pairs are read as
two strided halves (x[2i], x[2i+1]); both halves sit in the same cache lines, so each byte of x
is read from memory once.

rope: grid (N, ceil(H / BLOCK_H)). head_rms_norm_rope: grid (T, ceil(Hl / BLOCK_H)); one program
loads BLOCK_H whole heads ([BLOCK_H, Dh], <= 16 KiB bf16), reduces the sum of squares per head,
stores the scaled non-rope dims and the rotated rope dims: one read and one write of q. The norm
rounds to bf16 where the reference (DeepSeek's torch arithmetic on bf16) does: q^2, the mean, the sum
with eps, the scale (IEEE sqrt and division: what torch's CPU rsqrt rounds to) and the product.
"""
from __future__ import annotations

import struct

import torch
import triton
import triton.language as tl

from kernelbench.kernels.common import INTERPRET, check_device, check_dtype, sincos, to_bf16
from kernelbench.reference.rope import check_head_rms_norm_rope, check_rope_args
from kernelbench.registry import register_impl
from kernelbench.tuned_configs import lookup


def _check_kernel_args(x, positions, freqs):
    """What a kernel needs beyond the reference's shape checks: one device and the exact dtypes."""
    check_device(x, positions, freqs)
    check_dtype("x", x, torch.bfloat16)
    check_dtype("freqs", freqs, torch.float32)
    check_dtype("positions", positions, torch.int64, torch.int32)


@triton.jit
def _rotate(xe, xo, pos, f_ptr, R2, BLOCK_R2: tl.constexpr, INVERSE: tl.constexpr):
    """xe, xo [BLOCK_H, BLOCK_R2] fp32 even/odd halves; pos a scalar -> rotated (ye, yo)."""
    i = tl.arange(0, BLOCK_R2)
    f = tl.load(f_ptr + i, mask=i < R2, other=0.0)
    s, c = sincos(pos.to(tl.float32) * f)
    s = s[None, :]
    c = c[None, :]
    if INVERSE:
        s = -s
    return xe * c - xo * s, xe * s + xo * c


# rope --------------------------------------------------------------------------------------------
def rope_configs(params: dict) -> list[dict]:
    return [{"BLOCK_H": bh, "num_warps": w} for bh in (1, 4, 8, 16) for w in (1, 2, 4)]


def rope_default(params: dict) -> dict:
    return {"BLOCK_H": min(16, triton.next_power_of_2(max(params.get("H", 1), 1))), "num_warps": 2}


@triton.jit
def _rope_kernel(x_ptr, y_ptr, pos_ptr, f_ptr,   # x, y (N, H, R) bf16 contiguous; pos (N,) int64; f (R/2,) fp32
                 H, R2,
                 BLOCK_H: tl.constexpr, BLOCK_R2: tl.constexpr, INVERSE: tl.constexpr, INTERP: tl.constexpr):
    n = tl.program_id(0)
    hs = tl.program_id(1) * BLOCK_H + tl.arange(0, BLOCK_H)
    i = tl.arange(0, BLOCK_R2)
    mask = (hs[:, None] < H) & (i[None, :] < R2)
    offs = (n.to(tl.int64) * H + hs[:, None]) * (2 * R2) + 2 * i[None, :]
    xe = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    xo = tl.load(x_ptr + offs + 1, mask=mask, other=0.0).to(tl.float32)
    ye, yo = _rotate(xe, xo, tl.load(pos_ptr + n), f_ptr, R2, BLOCK_R2, INVERSE)
    tl.store(y_ptr + offs, to_bf16(ye, INTERP), mask=mask)
    tl.store(y_ptr + offs + 1, to_bf16(yo, INTERP), mask=mask)


@register_impl("rope", "triton", backend="triton", configs=rope_configs, default_config=rope_default,
               kernels=lambda: [_rope_kernel])
def rope(x: torch.Tensor, positions: torch.Tensor, freqs: torch.Tensor, inverse: bool = False,
         config: dict | None = None) -> torch.Tensor:
    if x.dim() < 2:
        raise ValueError(f"rope: x must be [N, ..., R], got shape {tuple(x.shape)}")
    check_rope_args("rope", x, positions, freqs, x.shape[-1])
    _check_kernel_args(x, positions, freqs)
    n, r = x.shape[0], x.shape[-1]
    xc = x.contiguous()
    h = xc.numel() // max(n * r, 1)
    y = torch.empty_like(xc)
    key = {"N": n, "H": h, "R": r}
    cfg = config or lookup("rope", key, rope_default(key))
    if xc.numel():
        _rope_kernel[(n, triton.cdiv(h, cfg["BLOCK_H"]))](
            xc, y, positions.contiguous(), freqs.contiguous(), h, r // 2,
            BLOCK_H=cfg["BLOCK_H"], BLOCK_R2=triton.next_power_of_2(r // 2), INVERSE=bool(inverse), INTERP=INTERPRET,
            num_warps=cfg["num_warps"])
    return y


# head_rms_norm_rope ------------------------------------------------------------------------------
def head_rope_configs(params: dict) -> list[dict]:
    """Heads per program x warps, <= 64 fp32 values of q per thread."""
    bd = triton.next_power_of_2(params.get("Dh", 512))
    return [{"BLOCK_H": bh, "num_warps": w} for bh in (1, 2, 4, 8) for w in (2, 4, 8) if bh * bd <= 64 * 32 * w]


def head_rope_default(params: dict) -> dict:
    return {"BLOCK_H": 2, "num_warps": 4}


@triton.jit
def head_rms_rope_rows(q_ptr, y_ptr, row, hmask, pos, f_ptr, DH, R2, eps_q, BLOCK_D: tl.constexpr,
                       BLOCK_R2: tl.constexpr, INTERP: tl.constexpr, CACHE: tl.constexpr):
    """head_rms_norm_rope of head rows starting at element offsets row (BH,) of q (hmask: which exist), at
    positions pos (BH,) -> y at the same offsets (y may be q). CACHE: the loads' cache modifier (".cg" when q was
    written by other programs of the same launch, else "")."""
    d = tl.arange(0, BLOCK_D)
    row = row[:, None]
    hmask = hmask[:, None]
    q = tl.load(q_ptr + row + d[None, :], mask=hmask & (d[None, :] < DH), other=0.0,
                cache_modifier=CACHE).to(tl.float32)
    # the reference's (torch's) bf16 steps: q^2, mean (fp32 sum / Dh), + eps (eps_q already bf16), rsqrt
    sq = to_bf16(q * q, INTERP).to(tl.float32)
    mean = to_bf16(tl.div_rn(tl.sum(sq, axis=1), DH.to(tl.float32)), INTERP).to(tl.float32)
    shifted = to_bf16(mean + eps_q, INTERP).to(tl.float32)
    r = to_bf16(tl.div_rn(1.0, tl.sqrt_rn(shifted)), INTERP).to(tl.float32)[:, None]
    # the rope dims, as even/odd halves (the same cache lines as the load above), scaled and rounded
    i = tl.arange(0, BLOCK_R2)
    pm = hmask & (i[None, :] < R2)
    offs = row + (DH - 2 * R2) + 2 * i[None, :]
    xe = to_bf16(tl.load(q_ptr + offs, mask=pm, other=0.0, cache_modifier=CACHE).to(tl.float32) * r,
                 INTERP).to(tl.float32)
    xo = to_bf16(tl.load(q_ptr + offs + 1, mask=pm, other=0.0, cache_modifier=CACHE).to(tl.float32) * r,
                 INTERP).to(tl.float32)
    nope = d[None, :] < DH - 2 * R2
    tl.store(y_ptr + row + d[None, :], to_bf16(q * r, INTERP), mask=hmask & nope)
    f = tl.load(f_ptr + i, mask=i < R2, other=0.0)
    s, c = sincos(pos.to(tl.float32)[:, None] * f[None, :])
    tl.store(y_ptr + offs, to_bf16(xe * c - xo * s, INTERP), mask=pm)
    tl.store(y_ptr + offs + 1, to_bf16(xe * s + xo * c, INTERP), mask=pm)


@triton.jit
def _head_rms_rope_kernel(q_ptr, y_ptr, pos_ptr, f_ptr,   # q, y (T, Hl, Dh) bf16 contiguous; pos (T,); f (R/2,)
                          HL, DH, R2, eps_q,
                          BLOCK_H: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_R2: tl.constexpr,
                          INTERP: tl.constexpr):
    t = tl.program_id(0)
    hs = tl.program_id(1) * BLOCK_H + tl.arange(0, BLOCK_H)
    pos = tl.zeros((BLOCK_H,), dtype=tl.int64) + tl.load(pos_ptr + t)
    head_rms_rope_rows(q_ptr, y_ptr, (t.to(tl.int64) * HL + hs) * DH, hs < HL, pos, f_ptr, DH, R2, eps_q, BLOCK_D,
                       BLOCK_R2, INTERP, "")


def _round_to_bf16(v: float) -> float:
    """v rounded to the nearest bf16 (ties to even) in plain Python: torch rounds the Python eps to q's dtype
    before the add; a tensor here would be a torch call on the hot path (the host-sync guard flags it)."""
    bits = struct.unpack("<I", struct.pack("<f", v))[0]
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return struct.unpack("<f", struct.pack("<I", bits))[0]


@register_impl("head_rms_norm_rope", "triton", backend="triton", configs=head_rope_configs,
               default_config=head_rope_default, kernels=lambda: [_head_rms_rope_kernel])
def head_rms_norm_rope(q: torch.Tensor, positions: torch.Tensor, freqs: torch.Tensor, eps: float,
                       config: dict | None = None) -> torch.Tensor:
    r = check_head_rms_norm_rope(q, positions, freqs)
    _check_kernel_args(q, positions, freqs)
    t, hl, dh = q.shape
    qc = q.contiguous()
    y = torch.empty_like(qc)
    key = {"T": t, "Hl": hl, "Dh": dh}
    cfg = config or lookup("head_rms_norm_rope", key, head_rope_default(key))
    if qc.numel():
        _head_rms_rope_kernel[(t, triton.cdiv(hl, cfg["BLOCK_H"]))](
            qc, y, positions.contiguous(), freqs.contiguous(), hl, dh, r // 2, _round_to_bf16(eps),
            BLOCK_H=cfg["BLOCK_H"], BLOCK_D=triton.next_power_of_2(dh), BLOCK_R2=triton.next_power_of_2(r // 2),
            INTERP=INTERPRET, num_warps=cfg["num_warps"])
    return y
