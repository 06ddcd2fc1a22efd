"""Pure-PyTorch stand-ins for the TileLang kernels of DeepSeek's official inference code (`kernel.py`),
so that the official `model.py` runs on a machine without TileLang (a CPU). `kernelbench fidelity`
installs them as the `kernel` module the official model imports.

Written from the kernels' documented semantics (SPEC sections 2-3 and the official docstrings), NOT
from kernelbench's reference ops: the fidelity comparison must not compare our code with itself.
Each function keeps the official signature and in-place behaviour:

    act_quant(x, block_size=128, scale_fmt=None, scale_dtype=fp32, inplace=False)
        per block of `block_size` along the last dim: amax = max(|x|, 1e-4) (fp32), s = amax / 448,
        or 2^ceil(log2(amax / 448)) when scale_fmt is set (UE8M0); codes = e4m3(clamp(x / s, +-448)).
        inplace: x <- bf16(float(codes) * s) (fused quantise + dequantise), returns x;
        else returns (codes [.., N] e4m3, s [.., N / block] in scale_dtype).
    fp4_act_quant(x, block_size=32, inplace=False)
        per block: amax = max(|x|, 6 * 2^-126), s = 2^ceil(log2(amax / 6)), codes = e2m1(clamp(x / s,
        +-6)) rounded to nearest, ties to even; inplace: x <- bf16(codes * s).
    fp8_gemm(a, a_s, b, b_s, scale_dtype)   C = A @ B^T, A e4m3 [M, K] with a scale per 1x128,
        B e4m3 [N, K] with a scale per 128x128 block; each 128-wide K block's product is scaled and
        summed in fp32; C in torch's default dtype (bf16 in the official model).
    fp4_gemm(a, a_s, b, b_s, scale_dtype)   the same with B e2m1 packed two per byte (low nibble =
        even element) [N, K / 2] and a scale per 1x32 of B; products summed per 32-wide K block.
    sparse_attn(q, kv, attn_sink, topk_idxs, softmax_scale)
        per (batch, token, head): softmax over the gathered kv rows (index -1 = masked) with one extra
        "sink" logit per head that takes probability mass but contributes no value:
        o = sum_j p_j kv_j / (sum_j p_j + exp(sink - m)), p_j = exp(scale q.kv_j - m), m = max score.
        As the official kernel: the index columns in blocks of 64 with an online softmax (running max,
        sum and accumulator rescaled per block), the p_j multiplying the values rounded to bf16 (its
        bf16 P @ V) relative to the running max, the sum of the p_j in fp32.
    hc_split_sinkhorn(mixes, hc_scale, hc_base, hc_mult=4, sinkhorn_iters=20, eps=1e-6)
        pre = sigmoid(m[:hc] * s0 + b[:hc]) + eps; post = 2 sigmoid(m[hc:2hc] * s1 + b[hc:2hc]);
        comb = softmax_row(m[2hc:] * s2 + b[2hc:]) + eps, then column-normalised (/ (col sum + eps)),
        then sinkhorn_iters - 1 times row- and column-normalised (all fp32).

`make_kernel_module(precise=True)` gives the same module with fp64 accumulation in the two GEMMs:
the comparison's noise floor (the official model against itself with higher-precision GEMMs).
"""
from __future__ import annotations

import types

import torch

FP8_MAX = 448.0
FP4_MAX = 6.0
E4M3, E8M0 = torch.float8_e4m3fn, torch.float8_e8m0fnu
# e2m1 code c (bit 3 = sign) -> value
FP4_VALUES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)
_FP4_MIDS = (0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0)


def pow2_ceil(v: torch.Tensor) -> torch.Tensor:
    """2^ceil(log2 v) for positive finite fp32 v, exactly (from the exponent and mantissa bits, as
    the official fast_round_scale)."""
    m, e = torch.frexp(v)                      # v = m * 2^e, m in [0.5, 1)
    e = torch.where(m == 0.5, e - 1, e)        # an exact power of two keeps its exponent
    return torch.ldexp(torch.ones_like(v), e)


def _blocks(x: torch.Tensor, block: int) -> torch.Tensor:
    n = x.size(-1)
    if n % block:
        raise ValueError(f"last dimension {n} is not a multiple of the block size {block}")
    return x.float().unflatten(-1, (n // block, block))


def act_quant(x: torch.Tensor, block_size: int = 128, scale_fmt: str | None = None,
              scale_dtype: torch.dtype = torch.float32, inplace: bool = False):
    xb = _blocks(x, block_size)
    amax = xb.abs().amax(-1, keepdim=True).clamp_min(1e-4)
    s = amax * torch.tensor(1.0 / FP8_MAX, dtype=torch.float32)
    if scale_fmt is not None:
        s = pow2_ceil(s)
    codes = (xb / s).clamp(-FP8_MAX, FP8_MAX).to(E4M3)
    if inplace:
        x.copy_((codes.float() * s).flatten(-2).to(x.dtype))
        return x
    return codes.flatten(-2), s.squeeze(-1).to(scale_dtype)


def round_e2m1(v: torch.Tensor) -> torch.Tensor:
    """fp32 in [-6, 6] -> the nearest e2m1 value (ties to the even code), as fp32."""
    a = v.abs()
    mids = torch.tensor(_FP4_MIDS, dtype=torch.float32, device=v.device)
    i = torch.bucketize(a, mids)                          # mids[i-1] < a <= mids[i]
    tie = (i < len(_FP4_MIDS)) & (a == mids[i.clamp_max(len(_FP4_MIDS) - 1)])
    i = torch.where(tie & (i % 2 == 1), i + 1, i)         # odd code index = odd mantissa: go up
    vals = torch.tensor(FP4_VALUES, dtype=torch.float32, device=v.device)
    return torch.copysign(vals[i], v)


def fp4_act_quant(x: torch.Tensor, block_size: int = 32, inplace: bool = False):
    xb = _blocks(x, block_size)
    amax = xb.abs().amax(-1, keepdim=True).clamp_min(FP4_MAX * 2.0 ** -126)
    s = pow2_ceil(amax * torch.tensor(1.0 / FP4_MAX, dtype=torch.float32))
    q = round_e2m1((xb / s).clamp(-FP4_MAX, FP4_MAX))
    if inplace:
        x.copy_((q * s).flatten(-2).to(x.dtype))
        return x
    codes = _encode_e2m1(q.flatten(-2))
    return codes, s.squeeze(-1).to(E8M0)


def _encode_e2m1(q: torch.Tensor) -> torch.Tensor:
    """e2m1 values -> float4_e2m1fn_x2 [.., N / 2] (low nibble = even element)."""
    vals = torch.tensor(FP4_VALUES, dtype=torch.float32, device=q.device)
    mag = (q.abs()[..., None] == vals).int().argmax(-1)
    code = (mag | ((q < 0) & (mag > 0)).int() << 3).to(torch.uint8)
    packed = code[..., 0::2] | (code[..., 1::2] << 4)
    return packed.view(torch.float4_e2m1fn_x2)


_PAIR_TABLES: dict = {}


def decode_e2m1(b: torch.Tensor) -> torch.Tensor:
    """float4_e2m1fn_x2 (or int8/uint8) [N, K / 2] -> fp32 values [N, K]."""
    table = _PAIR_TABLES.get(b.device)
    if table is None:                       # byte -> (value of its low nibble, value of its high nibble)
        vals = torch.tensor(FP4_VALUES + tuple(-v for v in FP4_VALUES), dtype=torch.float32, device=b.device)
        u = torch.arange(256, device=b.device)
        table = _PAIR_TABLES[b.device] = torch.stack([vals[u & 0xF], vals[u >> 4]], dim=-1)
    return table[b.view(torch.uint8).long()].flatten(-2)


def _blocked_gemm(a: torch.Tensor, b: torch.Tensor, sa: torch.Tensor, sb: torch.Tensor, group: int,
                  acc: torch.dtype) -> torch.Tensor:
    """sum_k (A_k @ B_k^T) * sa[:, k] * sb[:, k] over K blocks of `group`, in `acc` (fp32 or fp64).
    a [M, K], b [N, K] values (exact in fp32), sa [M, K/group], sb [N, K/group]."""
    M, K = a.shape
    N = b.shape[0]
    ab = a.to(acc).view(M, K // group, group).transpose(0, 1)          # [kb, M, g]
    bb = b.to(acc).view(N, K // group, group).permute(1, 2, 0)         # [kb, g, N]
    part = torch.bmm(ab, bb)                                           # [kb, M, N], one block each
    scaled = part * sa.to(acc).t()[:, :, None] * sb.to(acc).t()[:, None, :]
    if acc == torch.float32:          # accumulate block by block in fp32, as the kernel
        out = torch.zeros(M, N, dtype=acc, device=a.device)
        for k in range(scaled.shape[0]):
            out += scaled[k]
        return out
    return scaled.sum(0)


def _gemm(a, a_s, b_vals, b_s_full, group: int, acc: torch.dtype) -> torch.Tensor:
    K = a.size(-1)
    lead = a.shape[:-1]
    a2 = a.reshape(-1, K).float()
    sa = a_s.reshape(a2.shape[0], -1).float()
    sa = sa.repeat_interleave((K // group) // sa.shape[1], dim=1)      # one per `group` of K
    c = _blocked_gemm(a2, b_vals, sa, b_s_full, group, acc)
    return c.to(torch.get_default_dtype()).view(*lead, b_vals.shape[0])


def _fp8_gemm(acc: torch.dtype):
    def fp8_gemm(a: torch.Tensor, a_s: torch.Tensor, b: torch.Tensor, b_s: torch.Tensor,
                 scale_dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """C[M,N] = A[M,K] @ B[N,K]^T with per-128 block FP8 scaling on both A and B."""
        N, K = b.shape
        sb = b_s.float().repeat_interleave(128, dim=0)[:N]             # per row of B, per 128 of K
        return _gemm(a, a_s, b.float(), sb, 128, acc)
    return fp8_gemm


def _fp4_gemm(acc: torch.dtype):
    def fp4_gemm(a: torch.Tensor, a_s: torch.Tensor, b: torch.Tensor, b_s: torch.Tensor,
                 scale_dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """C[M,N] = A_fp8[M,K] @ B_fp4[N,K]^T; A per-128 scales, B per-32 E8M0 scales."""
        return _gemm(a, a_s, decode_e2m1(b), b_s.float(), 32, acc)
    return fp4_gemm


fp8_gemm = _fp8_gemm(torch.float32)
fp4_gemm = _fp4_gemm(torch.float32)


SPARSE_ATTN_BLOCK = 64      # the official kernel's `block`: selected entries per pipeline step


def sparse_attn(q: torch.Tensor, kv: torch.Tensor, attn_sink: torch.Tensor, topk_idxs: torch.Tensor,
                softmax_scale: float) -> torch.Tensor:
    b, m, h, d = q.shape
    idx = topk_idxs.long()
    valid = idx >= 0                                                   # [b, m, k]
    rows = kv[torch.arange(b, device=kv.device)[:, None, None], idx.clamp_min(0)].float()   # [b, m, k, d]
    rows = rows * valid[..., None]                                     # a masked slot loads zeros
    neg = torch.tensor(float("-inf"), device=q.device)
    acc = torch.zeros(b, m, h, d, device=q.device)                     # fp32 accumulator of P @ V
    run_max = torch.full((b, m, h), float("-inf"), device=q.device)
    run_sum = torch.zeros(b, m, h, device=q.device)
    for k0 in range(0, idx.shape[-1], SPARSE_ATTN_BLOCK):
        blk = slice(k0, k0 + SPARSE_ATTN_BLOCK)
        sc = torch.einsum("bmhd,bmkd->bmhk", q.float(), rows[:, :, blk]) * softmax_scale
        sc = torch.where(valid[:, :, None, blk], sc, neg)
        new_max = torch.maximum(run_max, sc.amax(-1))
        rescale = torch.exp(run_max - new_max)
        e = torch.exp(sc - new_max[..., None])
        run_sum = run_sum * rescale + e.sum(-1)
        # P is cast to bf16 for the second GEMM; the running sum keeps the fp32 values
        acc = acc * rescale[..., None] + torch.einsum("bmhk,bmkd->bmhd", e.to(torch.bfloat16).float(), rows[:, :, blk])
        run_max = new_max
    run_sum = run_sum + torch.exp(attn_sink.float()[None, None, :] - run_max)
    return (acc / run_sum[..., None]).to(torch.bfloat16)


def hc_split_sinkhorn(mixes: torch.Tensor, hc_scale: torch.Tensor, hc_base: torch.Tensor, hc_mult: int = 4,
                      sinkhorn_iters: int = 20, eps: float = 1e-6):
    hc = hc_mult
    m, s, base = mixes.float(), hc_scale.float(), hc_base.float()
    pre = torch.sigmoid(m[..., :hc] * s[0] + base[:hc]) + eps
    post = 2 * torch.sigmoid(m[..., hc:2 * hc] * s[1] + base[hc:2 * hc])
    comb = (m[..., 2 * hc:] * s[2] + base[2 * hc:]).unflatten(-1, (hc, hc))
    comb = comb.softmax(-1) + eps
    comb = comb / (comb.sum(-2, keepdim=True) + eps)
    for _ in range(sinkhorn_iters - 1):
        comb = comb / (comb.sum(-1, keepdim=True) + eps)
        comb = comb / (comb.sum(-2, keepdim=True) + eps)
    return pre, post, comb


def hadamard_transform(x: torch.Tensor, scale: float = 1.0) -> torch.Tensor:
    """Stand-in for fast_hadamard_transform.hadamard_transform: x @ H_n * scale along the last dim,
    H_n the Sylvester (natural-order) Hadamard matrix, n a power of two; fp32 math, x's dtype out."""
    n = x.size(-1)
    if n & (n - 1):
        raise ValueError(f"hadamard_transform needs a power-of-two last dimension, got {n}")
    y = x.float().reshape(-1, n)
    h = 1
    while h < n:
        y = y.view(-1, n // (2 * h), 2, h)
        y = torch.cat([y[:, :, 0] + y[:, :, 1], y[:, :, 0] - y[:, :, 1]], dim=-1)
        h *= 2
    return (y.reshape(x.shape) * scale).to(x.dtype)


def make_kernel_module(name: str = "kernel", precise: bool = False) -> types.ModuleType:
    """A module with the official kernel.py's public functions. precise=True: fp64-accumulating GEMMs."""
    mod = types.ModuleType(name, "kernelbench substitutes for DeepSeek's TileLang kernels (pure PyTorch)")
    acc = torch.float64 if precise else torch.float32
    for fn in (act_quant, fp4_act_quant, sparse_attn, hc_split_sinkhorn):
        setattr(mod, fn.__name__, fn)
    mod.fp8_gemm, mod.fp4_gemm = _fp8_gemm(acc), _fp4_gemm(acc)
    mod.KERNELBENCH_SUBSTITUTE = True
    return mod


def make_hadamard_module() -> types.ModuleType:
    mod = types.ModuleType("fast_hadamard_transform", "kernelbench substitute (pure PyTorch)")
    mod.hadamard_transform = hadamard_transform
    mod.KERNELBENCH_SUBSTITUTE = True
    return mod
