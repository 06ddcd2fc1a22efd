"""Linear layers (SPEC section 2, "fp8 GEMM" / "fp4 GEMM" / `linear(x, W)`).

Letters: M rows (tokens), K input features, N output features, T tokens, Gl o-groups per rank,
O o_lora_rank, Hg*Dh the grouped input width, Vl vocab rows per rank.

Block-scaled GEMM: C[m, n] = sum_kb (A_blk . B_blk) * sa[m, kb] * sb[n // 128, kb] (fp8 weights), or
with sb per 32 inputs (fp4 weights). Every product of codes and power-of-two scales is exact, so the
reference computes acc(dequant(A)) @ acc(dequant(B))^T: the same sum, in acc precision.
"""
from __future__ import annotations

import torch

from kernelbench.reference.precision import acc
from kernelbench.reference.quant import act_quant_fp8, dequant_fp4_weight, dequant_fp8_weight

FP8_BLOCK = 128
FP4_GROUP = 32


def check_tensor(name: str, t: torch.Tensor, dtype: torch.dtype, ndim: int) -> None:
    """A clear error unless `t` is a tensor of `dtype` with `ndim` dims (reference/linear.py, moe.py)."""
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name} must be a tensor, got {type(t).__name__}")
    if t.dtype != dtype:
        raise TypeError(f"{name} must be {dtype}, got {t.dtype}")
    if t.dim() != ndim:
        raise ValueError(f"{name} must be {ndim}-D, got shape {tuple(t.shape)}")


def dequant_act_fp8(x: torch.Tensor, group: int = FP8_BLOCK) -> torch.Tensor:
    """x (M, K) bf16 -> the values the fp8 GEMM sees: acc(e4m3 codes) * UE8M0 scale, (M, K)."""
    q, s = act_quant_fp8(x, group, "ue8m0")
    M, K = x.shape
    return (acc(q).view(M, K // group, group) * acc(s)[..., None]).view(M, K)


def fp8_linear(x, weight, weight_scale):
    """x (M, K) bf16, weight (N, K) e4m3, weight_scale (ceil(N/128), K/128) e8m0 -> y (M, N) bf16."""
    check_tensor("x", x, torch.bfloat16, 2)
    check_tensor("weight", weight, torch.float8_e4m3fn, 2)
    check_tensor("weight_scale", weight_scale, torch.float8_e8m0fnu, 2)
    N, K = weight.shape
    if x.shape[1] != K:
        raise ValueError(f"fp8_linear: x has K={x.shape[1]}, weight has K={K}")
    if K % FP8_BLOCK:
        raise ValueError(f"fp8_linear: K={K} must be a multiple of {FP8_BLOCK}")
    a = dequant_act_fp8(x)                                    # (M, K)
    w = dequant_fp8_weight(weight, weight_scale, FP8_BLOCK)   # (N, K)
    return (a @ w.T).to(torch.bfloat16)


def fp4_linear(x, weight, weight_scale):
    """x (M, K) bf16, weight (N, K/2) uint8 e2m1 pairs, weight_scale (N, K/32) e8m0 -> y (M, N) bf16."""
    check_tensor("x", x, torch.bfloat16, 2)
    check_tensor("weight", weight, torch.uint8, 2)
    check_tensor("weight_scale", weight_scale, torch.float8_e8m0fnu, 2)
    N, K = weight.shape[0], weight.shape[1] * 2
    if x.shape[1] != K:
        raise ValueError(f"fp4_linear: x has K={x.shape[1]}, packed weight holds K={K}")
    if K % FP8_BLOCK:
        raise ValueError(f"fp4_linear: K={K} must be a multiple of {FP8_BLOCK}")
    a = dequant_act_fp8(x)                                    # (M, K)
    w = dequant_fp4_weight(weight, weight_scale, FP4_GROUP)   # (N, K)
    return (a @ w.T).to(torch.bfloat16)


def bf16_linear(x, weight, out_dtype=torch.float32):
    """x (M, K) bf16, weight (N, K) bf16 -> y (M, N) out_dtype, acc accumulation."""
    check_tensor("x", x, torch.bfloat16, 2)
    check_tensor("weight", weight, torch.bfloat16, 2)
    if x.shape[1] != weight.shape[1]:
        raise ValueError(f"bf16_linear: x has K={x.shape[1]}, weight has K={weight.shape[1]}")
    return (acc(x) @ acc(weight).T).to(out_dtype)


def grouped_wo_a(o, weight):
    """o (T, Gl, Hg*Dh) bf16, weight (Gl, O, Hg*Dh) bf16 -> z (T, Gl, O) bf16: z[:, g] = o[:, g] @ weight[g]^T."""
    check_tensor("o", o, torch.bfloat16, 3)
    check_tensor("weight", weight, torch.bfloat16, 3)
    if o.shape[1] != weight.shape[0] or o.shape[2] != weight.shape[2]:
        raise ValueError(f"grouped_wo_a: o {tuple(o.shape)} does not fit weight {tuple(weight.shape)}")
    return torch.einsum("tgk,gok->tgo", acc(o), acc(weight)).to(torch.bfloat16)


def lm_head(x, weight):
    """x (T, D) bf16, weight (Vl, D) bf16 -> logits (T, Vl) fp32 (this rank's vocab shard)."""
    return bf16_linear(x, weight, torch.float32).float()
