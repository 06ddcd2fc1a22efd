"""Greedy and Gumbel-max sampling with a given Exp(1) noise tensor.

Legend: T tokens, V vocab, S splits of V per row, BLOCK_V columns per step, CHUNK = BLOCK_V * STEPS
columns per split.

argmax_v softmax(l / t)_v / noise_v = argmax_v (l_v / t - log noise_v): the softmax denominator and
the row max are common to the whole row, so the kernel needs neither and reads each logit and each
noise value once (greedy rows, t == 0, read no noise at all). The key differs from the reference's
p / noise only by rounding, so a different id needs two candidates within ~1e-7 relative. Ties
go to the lowest index, as torch.argmax; NaN logits are not supported.
Two launches: `_sample_split` grid (T, S) writes each split's best (key, index); `_sample_pick`
grid (T,) picks the best split, the lowest index among equal keys.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernelbench.kernels.common import check_device, check_dtype
from kernelbench.registry import register_impl
from kernelbench.tuned_configs import lookup

BIG = tl.constexpr(2 ** 62)   # larger than any index


def sample_configs(params: dict) -> list[dict]:
    return [{"BLOCK_V": bv, "STEPS": st, "num_warps": w} for bv in (1024, 2048, 4096) for st in (1, 2, 4, 8)
            for w in (4, 8)]


def sample_default(params: dict) -> dict:
    t = params.get("T", 1)
    return {"BLOCK_V": 2048, "STEPS": 1 if t <= 4 else 4, "num_warps": 4}


@triton.jit
def _sample_split(lg_ptr, temp_ptr, noise_ptr, val_ptr, idx_ptr,   # lg, noise (T, V) fp32; temp (T,) fp32
                  V, S, BLOCK_V: tl.constexpr, STEPS: tl.constexpr):  # val (T, S) fp32, idx (T, S) int64
    t = tl.program_id(0).to(tl.int64)
    s = tl.program_id(1)
    temp = tl.load(temp_ptr + t)
    greedy = temp == 0.0
    inv_t = 1.0 / tl.where(greedy, 1.0, temp)
    start = s.to(tl.int64) * (BLOCK_V * STEPS)
    best = -float("inf")
    best_i = start
    for k in tl.static_range(STEPS):
        offs = start + k * BLOCK_V + tl.arange(0, BLOCK_V)
        mask = offs < V
        lg = tl.load(lg_ptr + t * V + offs, mask=mask, other=-float("inf"))
        nz = tl.load(noise_ptr + t * V + offs, mask=mask & (offs < tl.where(greedy, 0, V)), other=1.0)
        key = tl.where(greedy, lg, lg * inv_t - tl.log(nz))
        key = tl.where(mask, key, -float("inf"))
        bm = tl.max(key, axis=0)
        bi = tl.min(tl.where(key == bm, offs, BIG), axis=0)
        upd = bm > best
        best = tl.where(upd, bm, best)
        best_i = tl.where(upd, bi, best_i)
    tl.store(val_ptr + t * S + s, best)
    tl.store(idx_ptr + t * S + s, best_i)


@triton.jit
def _sample_pick(val_ptr, idx_ptr, out_ptr, S, BLOCK_S: tl.constexpr):
    t = tl.program_id(0).to(tl.int64)
    s = tl.arange(0, BLOCK_S)
    mask = s < S
    v = tl.load(val_ptr + t * S + s, mask=mask, other=-float("inf"))
    i = tl.load(idx_ptr + t * S + s, mask=mask, other=BIG)
    best = tl.max(v, axis=0)
    tl.store(out_ptr + t, tl.min(tl.where((v == best) & mask, i, BIG), axis=0))


@register_impl("sample", "triton", backend="triton", configs=sample_configs, default_config=sample_default,
               kernels=lambda: [_sample_split, _sample_pick])
def sample(logits: torch.Tensor, temperature: torch.Tensor, noise: torch.Tensor, config: dict | None = None):
    check_device(logits, temperature, noise)
    for name, tensor in (("logits", logits), ("temperature", temperature), ("noise", noise)):
        check_dtype(name, tensor, torch.float32)
    if logits.dim() != 2:
        raise ValueError(f"sample: logits must be [T, V], got {tuple(logits.shape)}")
    t, v = logits.shape
    if tuple(temperature.shape) != (t,):
        raise ValueError(f"sample: temperature must be [{t}], got {tuple(temperature.shape)}")
    if tuple(noise.shape) != (t, v):
        raise ValueError(f"sample: noise must have the logits' shape {(t, v)}, got {tuple(noise.shape)}")
    if v == 0:
        raise ValueError("sample: the vocabulary is empty (V = 0)")
    key = {"T": t, "V": v}
    cfg = config or lookup("sample", key, sample_default(key))
    s = triton.cdiv(v, cfg["BLOCK_V"] * cfg["STEPS"])
    vals = torch.empty((t, s), dtype=torch.float32, device=logits.device)
    idx = torch.empty((t, s), dtype=torch.int64, device=logits.device)
    out = torch.empty((t,), dtype=torch.int64, device=logits.device)
    if t:
        _sample_split[(t, s)](logits.contiguous(), temperature.contiguous(), noise.contiguous(), vals, idx, v, s,
                              BLOCK_V=cfg["BLOCK_V"], STEPS=cfg["STEPS"], num_warps=cfg["num_warps"])
        _sample_pick[(t,)](vals, idx, out, s, BLOCK_S=triton.next_power_of_2(s), num_warps=1)
    return out
