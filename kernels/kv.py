"""kv_write fused (SPEC 3.4): kv_norm + RoPE on the last R dims + FP8 simulation (group 64, UE8M0) of
the first Dh - R dims + the write into the sequence's window ring slot p % W, in one launch.

Legend: T tokens, B sequences, W window, Dh head dim (512), R rope dims (64), NG = (Dh - R) / 64 FP8
groups (7). Grid (T,): one program per token reads its Dh values once and writes them twice (the
returned kv' and the ring slot). Rounding follows the reference step by step: the normed values are
rounded to bf16 (RNE) before the FP8 simulation and before the rotation, as DeepSeek's model.py does.
`attention_indices`: grid (T, ceil(n_max / BLOCK)), one program writes BLOCK columns of one token's
index row from its position alone (plus its top-k row for CSA); the output width n_max comes from
the caller, so nothing is read on the host (CUDA-graph capturable).
Imported by kernels/attention.py (the registry loads kernels by op family).
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernelbench.kernels.common import INTERPRET, check_device, sincos, to_bf16
from kernelbench.kernels.quant import e4m3_round_code, pow2, ue8m0_exp
from kernelbench.reference.kv import _check_tokens, check_attention_indices
from kernelbench.registry import register_impl
from kernelbench.tuned_configs import lookup


def kv_write_configs(params: dict) -> list[dict]:
    return [{"num_warps": w} for w in (1, 2, 4)]


def kv_write_default(params: dict) -> dict:
    return {"num_warps": 2}


@triton.jit
def kv_write_rows(src_ptr, s_src, rows, rmask, w_ptr, pos_ptr, seq_ptr, f_ptr, out_ptr, s_out, cache_ptr,
                  eps, W, s_cb, s_cw, DH: tl.constexpr, R: tl.constexpr, NG_P2: tl.constexpr,
                  RNE_FIX: tl.constexpr, CACHE: tl.constexpr):
    """kv_write of the token rows `rows` (rmask: which exist): src rows s_src apart -> out rows s_out apart and
    the ring slot cache[seq, pos % W]. CACHE: the loads' cache modifier (".cg" when src was written by other
    programs of the same launch, else "")."""
    NOPE: tl.constexpr = DH - R
    d = tl.arange(0, DH)
    src = src_ptr + rows[:, None].to(tl.int64) * s_src
    out = out_ptr + rows[:, None].to(tl.int64) * s_out
    x = tl.load(src + d[None, :], mask=rmask[:, None], other=0.0, cache_modifier=CACHE).to(tl.float32)
    rs = 1.0 / tl.sqrt(tl.sum(x * x, axis=1) / DH + eps)                  # (RB,)
    pos = tl.load(pos_ptr + rows, mask=rmask, other=0)
    dst = cache_ptr + tl.load(seq_ptr + rows, mask=rmask, other=0).to(tl.int64) * s_cb + (pos % W) * s_cw
    # nope dims: (NG, 64) groups -> bf16 norm -> e4m3 with one power-of-two scale per group
    g = tl.arange(0, NG_P2)
    offs = g[:, None] * 64 + tl.arange(0, 64)[None, :]
    gm = (g < NOPE // 64)[:, None]
    m3 = rmask[:, None, None] & gm[None, :, :]
    xn = tl.load(src[:, :, None] + offs[None, :, :], mask=m3, other=0.0, cache_modifier=CACHE).to(tl.float32)
    wn = tl.load(w_ptr + offs, mask=gm, other=0.0).to(tl.float32)
    y = to_bf16((xn * rs[:, None, None]) * wn[None, :, :], RNE_FIX).to(tl.float32)
    amax = tl.maximum(tl.max(tl.abs(y), axis=2), 1e-4)                   # (RB, NG)
    se = ue8m0_exp(amax, 8, 0x600000)                                    # 448 = 1.75 * 2^8
    v = tl.minimum(tl.maximum(y * pow2(-se)[:, :, None], -448.0), 448.0)
    _, val = e4m3_round_code(v)
    q = (val * pow2(se)[:, :, None]).to(tl.bfloat16)                    # exact: 4 significant bits
    tl.store(out[:, :, None] + offs[None, :, :], q, mask=m3)
    tl.store(dst[:, None, None] + offs[None, :, :], q, mask=m3)
    # rope dims: interleaved pairs of the bf16 normed values, rotated by p * f
    i = tl.arange(0, R // 2)
    ev = NOPE + 2 * i
    rm2 = rmask[:, None]
    we = tl.load(w_ptr + ev).to(tl.float32)[None, :]
    wo = tl.load(w_ptr + ev + 1).to(tl.float32)[None, :]
    xe = to_bf16((tl.load(src + ev[None, :], mask=rm2, other=0.0, cache_modifier=CACHE).to(tl.float32)
                  * rs[:, None]) * we, RNE_FIX).to(tl.float32)
    xo = to_bf16((tl.load(src + ev[None, :] + 1, mask=rm2, other=0.0, cache_modifier=CACHE).to(tl.float32)
                  * rs[:, None]) * wo, RNE_FIX).to(tl.float32)
    sn, cs = sincos(pos.to(tl.float32)[:, None] * tl.load(f_ptr + i)[None, :])
    ye = to_bf16(xe * cs - xo * sn, RNE_FIX)
    yo = to_bf16(xe * sn + xo * cs, RNE_FIX)
    tl.store(out + ev[None, :], ye, mask=rm2)
    tl.store(out + ev[None, :] + 1, yo, mask=rm2)
    tl.store(dst[:, None] + ev[None, :], ye, mask=rm2)
    tl.store(dst[:, None] + ev[None, :] + 1, yo, mask=rm2)


@triton.jit
def _kv_write_kernel(kv_ptr, w_ptr, pos_ptr, seq_ptr, f_ptr, out_ptr, cache_ptr,   # kv, out (T, Dh) bf16
                     eps, W, s_cb, s_cw,                                         # cache (B, W, Dh) bf16
                     DH: tl.constexpr, R: tl.constexpr, NG_P2: tl.constexpr, RNE_FIX: tl.constexpr):
    rows = tl.program_id(0) + tl.arange(0, 1)
    kv_write_rows(kv_ptr, DH, rows, rows >= 0, w_ptr, pos_ptr, seq_ptr, f_ptr, out_ptr, DH, cache_ptr, eps, W,
                  s_cb, s_cw, DH, R, NG_P2, RNE_FIX, "")


@register_impl("kv_write", "triton", backend="triton", configs=kv_write_configs, default_config=kv_write_default,
               kernels=lambda: [_kv_write_kernel])
def kv_write(kv: torch.Tensor, weight: torch.Tensor, eps: float, positions: torch.Tensor, seq_ids: torch.Tensor,
             freqs: torch.Tensor, window_cache: torch.Tensor, config: dict | None = None) -> torch.Tensor:
    """kv [T, Dh] bf16 -> kv' [T, Dh] bf16, also written to window_cache[seq, p % W] (in place).
    Shapes are checked; seq_ids/positions values are not (that would need a host sync)."""
    if kv.dim() != 2 or window_cache.dim() != 3 or kv.shape[1] != window_cache.shape[2]:
        raise ValueError(f"kv_write: kv [T, Dh] and window_cache [B, W, Dh] must agree, got {tuple(kv.shape)} "
                         f"and {tuple(window_cache.shape)}")
    if kv.dtype != torch.bfloat16 or window_cache.dtype != torch.bfloat16 or weight.dtype != torch.bfloat16:
        raise TypeError(f"kv_write: kv, weight and window_cache must be bf16, got {kv.dtype}, {weight.dtype}, "
                        f"{window_cache.dtype}")
    t, dh = kv.shape
    r = 2 * freqs.shape[0]
    if not 0 < r < dh or (dh - r) % 64 or dh & (dh - 1) or r & (r - 1) or weight.shape != (dh,):
        raise ValueError(f"kv_write: need Dh a power of two, R a power of two, Dh - R a multiple of 64, "
                         f"weight [Dh]; got Dh={dh}, R={r}, weight {tuple(weight.shape)}")
    if positions.dim() != 1 or positions.shape[0] != t or seq_ids.dim() != 1 or seq_ids.shape[0] != t:
        raise ValueError(f"kv_write: positions and seq_ids must be [T={t}]")
    if window_cache.stride(2) != 1:
        raise ValueError("kv_write: window_cache must be contiguous in Dh")
    if kv.device.type == "cpu":
        _check_tokens("kv_write", positions, seq_ids, t, window_cache.shape[0])   # cheap on the CPU
    dev = check_device(kv, weight, positions, seq_ids, freqs, window_cache)
    cfg = config or lookup("kv_write", {"T": t, "Dh": dh}, kv_write_default({}))
    out = torch.empty_like(kv)
    if t:
        _kv_write_kernel[(t,)](kv.contiguous(), weight.contiguous(), positions.contiguous(), seq_ids.contiguous(),
                               freqs.contiguous(), out, window_cache, float(eps), window_cache.shape[1],
                               window_cache.stride(0), window_cache.stride(1), DH=dh, R=r,
                               NG_P2=triton.next_power_of_2((dh - r) // 64), RNE_FIX=INTERPRET,
                               num_warps=cfg["num_warps"], num_stages=1)
    return out


# attention_indices -------------------------------------------------------------------------------
KIND_CODE = {"swa": 0, "csa": 1, "hca": 2}


def attention_indices_configs(params: dict) -> list[dict]:
    return [{"BLOCK": b, "num_warps": w} for b in (128, 256, 1024) for w in (1, 4)]


def attention_indices_default(params: dict) -> dict:
    return {"BLOCK": 256, "num_warps": 1}


@triton.jit
def window_slots(p, c, W):
    """Column c < W of a position-p token's index row: the window ring slot of token max(p-W+1, 0) + c, or -1 past
    p (attention_indices' window part; csa_indices writes the same from its top-k program)."""
    tok = tl.maximum(p - W + 1, 0) + c
    return tl.where(tok <= p, tok % W, -1)


@triton.jit
def _attention_indices_kernel(pos_ptr, topk_ptr, out_ptr, len_ptr,    # out (T, n_max) int32, len (T,) int32
                              W, RATIO, K, N_MAX, s_tt, s_ot,
                              KIND: tl.constexpr, BLOCK: tl.constexpr):
    """Column c of token t (position p): c < W ring slot of token max(p-W+1, 0) + c, or -1 past p;
    c >= W, j = c - W: csa W + topk[t, j] (or -1), hca W + j while j < (p+1)//ratio (else -1)."""
    t = tl.program_id(0)
    cb = tl.program_id(1)
    p = tl.load(pos_ptr + t).to(tl.int64)
    c = cb * BLOCK + tl.arange(0, BLOCK)
    win = window_slots(p, c, W)
    j = c - W
    if KIND == 0:
        val = win
        length = W
    elif KIND == 1:
        ti = tl.load(topk_ptr + t * s_tt + j, mask=(j >= 0) & (j < K), other=-1).to(tl.int64)
        val = tl.where(c < W, win, tl.where(ti >= 0, ti + W, -1))
        length = (W + tl.minimum((p + 1) // RATIO, K)).to(tl.int32)      # top-k rows are -1 past (p+1)//ratio
    else:
        n = (p + 1) // RATIO
        val = tl.where(c < W, win, tl.where(j < n, j + W, -1))
        length = (W + tl.minimum(n, N_MAX - W)).to(tl.int32)
    tl.store(out_ptr + t.to(tl.int64) * s_ot + c, val.to(tl.int32), mask=c < N_MAX)
    if cb == 0:
        tl.store(len_ptr + t, length)


@register_impl("attention_indices", "triton", backend="triton", configs=attention_indices_configs,
               default_config=attention_indices_default, kernels=lambda: [_attention_indices_kernel])
def attention_indices(positions: torch.Tensor, kind: str, window: int, ratio: int,
                      topk_indices: torch.Tensor | None, n_max: int,
                      config: dict | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """positions [T] -> indices [T, n_max] int32, lengths [T] int32 (contract: reference/kv.py).
    Shapes are checked; position and top-k values are not (no host sync): an hca position with more
    than n_max - W compressed entries gets its first n_max - W (lengths clamped to n_max)."""
    k = check_attention_indices(positions, kind, window, ratio, topk_indices, n_max)
    dev = check_device(positions, topk_indices)
    t = positions.shape[0]
    cfg = config or lookup("attention_indices", {"T": t, "n_max": n_max, "kind": kind},
                           attention_indices_default({}))
    out = torch.empty(t, n_max, dtype=torch.int32, device=dev)
    lengths = torch.empty(t, dtype=torch.int32, device=dev)
    if t == 0:
        return out, lengths
    pos = positions.contiguous()
    topk = topk_indices.contiguous() if kind == "csa" else pos
    _attention_indices_kernel[(t, triton.cdiv(n_max, cfg["BLOCK"]))](
        pos, topk, out, lengths, window, ratio if kind != "swa" else 1, k, n_max,
        topk.stride(0) if kind == "csa" else 0, out.stride(0),
        KIND=KIND_CODE[kind], BLOCK=cfg["BLOCK"], num_warps=cfg["num_warps"], num_stages=1)
    return out, lengths
