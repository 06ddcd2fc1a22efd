"""RMSNorm and the 128-wide Hadamard rotation.

Legend: M rows, N normalized width, BLOCK_N = next power of two >= N (one row lives in registers:
N <= 7168 in DSV4, i.e. <= 32 fp32 values per thread at 8 warps), BLOCK_M rows per program.

rms_norm: grid (ceil(M / BLOCK_M),); one read of x, one write of y, fp32 math, one bf16 rounding.
hadamard: grid (ceil(M / BLOCK_M),) over the rows of x viewed [M, 128]; y = x @ H / sqrt(128) as one
tensor-core dot with H built in registers from the bit rule H[i, j] = (-1)^popcount(i & j) (never
read from memory). Shared memory: the [128, 128] bf16 H operand (32 KiB) + BLOCK_M x 128 x 2 bytes,
under 64 KiB for BLOCK_M <= 128 (sm_120 allows 101,376 bytes).
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernelbench.kernels import common
from kernelbench.kernels.common import INTERPRET, check_device, check_dtype, fwht128_rows, hadamard128_matrix, to_bf16
from kernelbench.registry import register_impl
from kernelbench.tuned_configs import lookup


# rms_norm ----------------------------------------------------------------------------------------
MAX_VALUES_PER_THREAD = 64   # fp32 values a thread may hold for a row tile without spilling (sm_120, 255 regs)


def rms_norm_configs(params: dict) -> list[dict]:
    """Rows per program x warps, keeping BLOCK_M * BLOCK_N / (32 * warps) <= 64 fp32 values per thread."""
    bn = triton.next_power_of_2(params.get("N", 4096))
    return [{"BLOCK_M": bm, "num_warps": w} for bm in (1, 2, 4) for w in (1, 2, 4, 8)
            if bm * bn <= MAX_VALUES_PER_THREAD * 32 * w]


def rms_norm_default(params: dict) -> dict:
    n = params.get("N", 4096)
    return {"BLOCK_M": 1, "num_warps": 4 if n <= 2048 else 8}


@triton.jit
def _rms_norm_kernel(x_ptr, w_ptr, y_ptr,   # x (M, N) bf16, w (N,) bf16, y (M, N) bf16
                     M, N, s_xm, s_ym, eps,
                     BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, INTERP: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_N)
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    x = tl.load(x_ptr + rows[:, None].to(tl.int64) * s_xm + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + cols, mask=cols < N, other=0.0).to(tl.float32)
    r = tl.rsqrt(tl.sum(x * x, axis=1) / N + eps)
    y = w[None, :] * (x * r[:, None])
    tl.store(y_ptr + rows[:, None].to(tl.int64) * s_ym + cols[None, :], to_bf16(y, INTERP), mask=mask)


@register_impl("rms_norm", "triton", backend="triton", configs=rms_norm_configs, default_config=rms_norm_default,
               kernels=lambda: [_rms_norm_kernel])
def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float, config: dict | None = None) -> torch.Tensor:
    check_device(x, weight)
    check_dtype("x", x, torch.bfloat16)
    check_dtype("weight", weight, torch.bfloat16)
    if x.dim() < 1 or weight.dim() != 1 or x.shape[-1] != weight.shape[0]:
        raise ValueError(f"rms_norm: x [..., N] and weight [N] must agree, got {tuple(x.shape)} and "
                         f"{tuple(weight.shape)}")
    if eps < 0:
        raise ValueError(f"rms_norm: eps must be >= 0, got {eps}")
    n = x.shape[-1]
    x2 = x.reshape(-1, n)
    if x2.stride(-1) != 1:
        x2 = x2.contiguous()
    m = x2.shape[0]
    y = torch.empty((m, n), dtype=x.dtype, device=x.device)
    cfg = config or lookup("rms_norm", {"M": m, "N": n}, rms_norm_default({"M": m, "N": n}))
    if m:
        _rms_norm_kernel[(triton.cdiv(m, cfg["BLOCK_M"]),)](
            x2, weight.contiguous(), y, m, n, x2.stride(0), y.stride(0), eps,
            BLOCK_M=cfg["BLOCK_M"], BLOCK_N=triton.next_power_of_2(n), INTERP=INTERPRET, num_warps=cfg["num_warps"])
    return y.reshape(x.shape)


# hadamard ----------------------------------------------------------------------------------------
def hadamard_configs(params: dict) -> list[dict]:
    """Rows per program x warps; the fp32 [BLOCK_M, 128] accumulator stays <= 64 values per thread. FWHT: the
    butterfly form (kernels/common.py fwht128_rows; the default follows KERNELBENCH_HADAMARD) or the product with the
    Sylvester tile (H200, session 20: 1.40-1.54 against 2.20-2.35 us at 1-64 tokens x 8 heads, the best of each)."""
    return [{"BLOCK_M": bm, "num_warps": w, "num_stages": 1, "FWHT": fwht} for bm in (16, 32, 64, 128) for w in (4, 8)
            for fwht in (False, True) if bm * 128 <= MAX_VALUES_PER_THREAD * 32 * w]


def hadamard_default(params: dict) -> dict:
    m = params.get("T", 1) * params.get("H", 1)
    return {"BLOCK_M": 16 if m <= 256 else 64, "num_warps": 4, "num_stages": 1, "FWHT": _fwht_default()}


def _fwht_default() -> bool:
    """The hadamard op's form when its config does not say: the kernels' switch (kernels/common.py
    KERNELBENCH_HADAMARD, the butterfly by default)."""
    return bool(common.HADAMARD_BUTTERFLY)


@triton.jit
def _hadamard_kernel(x_ptr, y_ptr, M,   # x (M, 128) bf16, y (M, 128) bf16, both contiguous
                     BLOCK_M: tl.constexpr, DOT_UPCAST: tl.constexpr, INTERP: tl.constexpr,
                     FWHT: tl.constexpr = False):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, 128)
    offs = rows[:, None].to(tl.int64) * 128 + cols[None, :]
    mask = rows[:, None] < M
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    if FWHT:
        y = fwht128_rows(x.to(tl.float32), INTERP)
    else:
        y = hadamard128_matrix(x, INTERP, DOT_UPCAST)
    tl.store(y_ptr + offs, y, mask=mask)


@register_impl("hadamard", "triton", backend="triton", configs=hadamard_configs, default_config=hadamard_default,
               kernels=lambda: [_hadamard_kernel])
def hadamard(x: torch.Tensor, config: dict | None = None) -> torch.Tensor:
    check_device(x)
    check_dtype("x", x, torch.bfloat16)
    if x.dim() < 1 or x.shape[-1] != 128:
        raise ValueError(f"hadamard: last dim must be 128, got shape {tuple(x.shape)}")
    x2 = x.reshape(-1, 128).contiguous()
    m = x2.shape[0]
    y = torch.empty_like(x2)
    key = {"T": m, "H": 1}
    cfg = config or lookup("hadamard", key, hadamard_default(key))
    if m:
        _hadamard_kernel[(triton.cdiv(m, cfg["BLOCK_M"]),)](
            x2, y, m, BLOCK_M=cfg["BLOCK_M"], DOT_UPCAST=INTERPRET, INTERP=INTERPRET,
            FWHT=bool(cfg.get("FWHT", _fwht_default())),
            num_warps=cfg["num_warps"], num_stages=cfg["num_stages"])
    return y.reshape(x.shape)
