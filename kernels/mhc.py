"""mHC: pre (projection + split + Sinkhorn + weighted sum), post, post fused with the next pre, head.

Legend: T tokens, D hidden, 4 streams, K = 4D the flattened stream width, ROWS projection rows
(24 for pre, 4 for the head) padded to NPAD (32 / 16, the dot's minimum N is 16), S = ceil(D /
BLOCK_D) splits of the projection, BLOCK_T tokens per projection program.

The projection m = flatten(h) @ fn^T is a reduction over K = 16K-28K columns of a 1.5-2.75 MB fp32
weight: it has to be split over many programs to pull that weight at full bandwidth, and Sinkhorn,
the weighted sum x' and its norm need the whole reduction.

Impl "triton" of mhc_pre, mhc_post_pre and mhc_post_pre_norm ("triton_v4" of mhc_head; config `mhc4_default`),
config PAIR: "proj4" (below; faster than "triton_v2" on the H200 at T = 1 and 64, slower at T = 16) or "mix"
("triton_v2"'s kernels and config), the default at 4 < T <= 16 (docs/perf/mhc_norm.md). PAIR "proj4", two launches,
each one dependent memory round trip:
  `_mhc_proj4` grid (ceil(T / BLOCK_T), ceil(D / BLOCK_D)): issues every load (the four fn tiles, x, h) before any
  use; with FUSE_POST forms and stores h'; projects the bf16 h' (fp32 FMAs in a [BLOCK_T, NPAD, BLOCK_D] product
  for T <= 4 (SIMT), else three bf16 MMAs per stream with the operands read back from the stored h' (RELOAD: formed
  in registers, the post took the dot operands' replicated layout: 244 instead of 72 registers on sm_90)); partial
  m and sum of squares to ws (T, S, NPAD).
  `_mhc_fin4` grid (T, NB + 1): x programs sum only the partials they need (m_0..3, sum of squares) in split order
  and write x for BLOCK_MIX columns; with the fused norm one x program holds the token's whole row (norm_warps
  warps) and normalizes the bf16 x' in registers (no ticket, no second pass). Program NB runs Sinkhorn on sixteen
  scalars per thread (one rcp.approx per row step) beside them and writes post and comb.
Impl "triton_v3" (`_mhc_proj1`, `_mhc_tail`; config `mhc1_default`; slower than "triton_v2" on the H200 in its
first measurement, docs/perf/mhc_norm.md, so never the default):
  `_mhc_proj1` grid (ceil(T / BLOCK_T), S = ceil(D / BLOCK_D)): each program projects BLOCK_D columns of all
  four streams (with FUSE_POST it first forms and stores h' = post * x + comb^T h), on tensor cores (three
  bf16 MMAs of the exact 3-way bf16 split of fn, BLOCK_T = 16) or, for T <= SIMT_MAX_T, with fp32 FMAs in a
  [BLOCK_T, NPAD, BLOCK_D] product (SIMT; no tile changes layout, so no shared-memory round trips), and
  stores its partial m and sum of squares (in the padding column ROWS) to ws (T, S, NPAD).
  The tail of a token (`_token_tail`): the S partials summed in split order (deterministic), the sigmoid
  split, Sinkhorn on sixteen scalars (the 4 x 4 matrix lives in every thread's registers: row and column
  sums are adds, no shuffle or barrier), x' = sum_i pre_i h'_i over the whole row and, with NORM, the
  exact norm of the bf16 x' (one pass in registers when the row fits one BLOCK_FIN block).
  ONE (T <= ONE_LAUNCH_MAX_T): the token block's last projection program to arrive (atomic ticket, acq_rel,
  counters from `token_counters`, re-armed by that program) runs the tail: one launch per call. Else a
  second launch `_mhc_tail` grid (T,) runs it, one program per token.
Impl "triton_v2" (the default before issue 17 session 5, still impl "triton"'s at 4 < T <= 16 and mhc_head's
"triton"), two launches:
  1. `_mhc_proj` grid (ceil(T / BLOCK_T), ceil(D / BLOCK_D), 4 / NJ): each program takes BLOCK_D
     columns of NJ of the 4 streams ([BLOCK_T, BLOCK_D] bf16 tiles), multiplies them with the matching [NPAD, BLOCK_D] slices
     of fn on tensor cores with fp32 accuracy (fn split exactly into three bf16 parts, h is exactly
     bf16: three bf16 MMAs, fp32 accumulation; tf32 would keep 10 bits of fn, an fp32 FMA dot spilled
     registers on sm_120), and the partial sum of squares; partials go to a small fp32 workspace
     [S, T, NPAD] + [S, T] (S = D / BLOCK_D x 4 / NJ when the streams are a grid axis). With FUSE_POST it
     first forms h' = post * x + comb^T h for its tile from x and h, stores h' in bf16 and projects
     the rounded h' (the next pre reads the stored streams): post and pre share one read of h.
  2. `_mhc_mix` grid (T, ceil(D / BLOCK_MIX)): sums the S partials, applies the rsqrt, sigmoid
     splits and 20 Sinkhorn iterations on the 4 x 4 comb in registers (with 4 warps its cross-warp
     reductions cost ~3.6 us of latency on the H200, see docs/perf/mhc_norm.md: 1-2 warp configs keep
     them in a warp), and writes x = sum_i pre_i h_i for its columns; the first program of a token
     writes post and comb.
     Only one program of a token runs Sinkhorn (the first; with SPLIT_NORM an extra last program that does
     nothing else, so Sinkhorn's latency overlaps the x' blocks).
     mhc_post_pre_norm (NORM, SPLIT_NORM; impl "triton_v2"): grid (T, ceil(D / BLOCK_MIX) + 1); each program stores
     its block of the bf16 x' and that block's sum of squares, then takes a ticket from a per-token counter
     (atomic, acq_rel); the token's last program sums the block sums in block order (deterministic) and
     rewrites the row as w * x' * rsqrt(mean + eps) (x' read back as stored: the norm of the bf16 x', as the
     reference), then re-arms the counter (`token_counters`: zero at every launch, no memset launch). The
     sublayer's input RMSNorm costs no launch of its own. Impl "triton_v1" (SPLIT_NORM off): grid (T, 1),
     the token's one program walks D twice (sum of squares, then x' again from L2): at T=1 a single program.
mhc_post alone is `_mhc_post`, grid (T, ceil(D / BLOCK_D)): one read of x and h, one write of h'.
Shared memory: the bf16 dot operands, BLOCK_T * BLOCK_D * 2 + 3 * NPAD * BLOCK_D * 2 bytes per stream
(checked against sm_120's 101,376 bytes in tests/test_mhc.py).
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernelbench.kernels.common import (INTERPRET, check_device, check_dtype, check_shape, dot_operand, pdl_args,
                                       pdl_enter, to_bf16, zeroed_scratch)
from kernelbench.registry import register_impl
from kernelbench.tuned_configs import lookup

HC = 4
_HC = tl.constexpr(HC)   # the same, as a constant the kernels can read


# config space ------------------------------------------------------------------------------------
def mhc_configs(params: dict, split_norm: bool = False) -> list[dict]:
    """(BLOCK_T tokens, BLOCK_D columns, warps) of the projection program, NJ streams per projection
    program (4: one program walks all four; 1: the stream index is a grid axis, 4x the programs),
    and (BLOCK_MIX columns, warps) of the mix program. Only projection tiles that compile for sm_120
    without register spills in both the plain and the fused-post form are listed (compiled for
    GPUTarget("cuda", 120, 32) at T=64, D=4096: bigger tiles, e.g. (32, 128), spilled), and mix
    tiles of <= 64 fp32 h values per thread; 1-2 mix warps keep Sinkhorn's reductions inside a warp
    (no barrier). The default is the configuration measured on the H200 (docs/perf/mhc_norm.md)."""
    tiles = ((16, 32, 4), (16, 64, 4), (16, 64, 8), (16, 128, 8), (32, 64, 8), (64, 32, 8))
    mixes = ((512, 1), (512, 2), (1024, 2), (512, 4), (1024, 4), (2048, 4))
    extra = {"SPLIT_NORM": True} if split_norm else {}
    return [{"BLOCK_T": bt, "BLOCK_D": bd, "num_warps": w, "NJ": nj, "BLOCK_MIX": mix, "mix_warps": mw, **extra}
            for bt, bd, w in tiles for nj in (4, 1) for mix, mw in mixes]


def mhc_default(params: dict) -> dict:
    t = params.get("T", 1)
    return {"BLOCK_T": 16 if t <= 16 else 32, "BLOCK_D": 64, "num_warps": 4 if t <= 16 else 8, "NJ": 4,
            "BLOCK_MIX": 1024, "mix_warps": 4}


def mhc_norm_default(params: dict) -> dict:
    """mhc_post_pre_norm: the normalized mix over a (T, D / BLOCK_MIX) grid (SPLIT_NORM; not yet tuned)."""
    return {**mhc_default(params), "SPLIT_NORM": True, "BLOCK_MIX": 512, "mix_warps": 2}


def mhc_post_configs(params: dict) -> list[dict]:
    return [{"BLOCK_D": bd, "num_warps": w} for bd in (256, 512, 1024, 2048) for w in (2, 4, 8)]


def mhc_post_default(params: dict) -> dict:
    return {"BLOCK_D": 1024, "num_warps": 4}


# kernels -----------------------------------------------------------------------------------------
@triton.jit
def _sublayer_x(x_ptr, xa_ptr, offs, mask, X_ROUND: tl.constexpr, X_ADD: tl.constexpr, INTERP: tl.constexpr):
    """The sublayer output a fused post reads (reference/mhc.py sublayer_output), fp32 holding bf16 values: bf16 x
    as stored; X_ROUND: x (fp32, a TP partial sum) plus, X_ADD, the bf16 xa summed in fp32, rounded to bf16 once."""
    xv = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    if X_ADD:
        xv += tl.load(xa_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    if X_ROUND:
        xv = to_bf16(xv, INTERP).to(tl.float32)
    return xv


@triton.jit
def _mhc_proj(h_ptr, x_ptr, xa_ptr, post_ptr, comb_ptr, hout_ptr, fn_ptr, ws_ptr, sq_ptr,
              # h, hout (T, 4, D) bf16; x (T, D) bf16 or fp32, xa (T, D) bf16 (_sublayer_x); post (T, 4), comb (T, 4, 4),
              # fn (ROWS, 4D) fp32
              # ws (S * 4 / NJ, T, NPAD) fp32, sq (S * 4 / NJ, T) fp32
              T, D, ROWS,
              FUSE_POST: tl.constexpr, BLOCK_T: tl.constexpr, BLOCK_D: tl.constexpr, NPAD: tl.constexpr,
              NJ: tl.constexpr, DOT_UPCAST: tl.constexpr, INTERP: tl.constexpr, X_ROUND: tl.constexpr = False,
              X_ADD: tl.constexpr = False):
    s = tl.program_id(1)
    j0 = tl.program_id(2) * NJ      # this program's streams: j0 .. j0 + NJ - 1
    ts = tl.program_id(0) * BLOCK_T + tl.arange(0, BLOCK_T)
    d = s * BLOCK_D + tl.arange(0, BLOCK_D)
    tmask = ts < T
    m2 = tmask[:, None] & (d[None, :] < D)
    hrow = ts[:, None].to(tl.int64) * (_HC * D) + d[None, :]
    rows = tl.arange(0, NPAD)
    fmask = (rows[:, None] < ROWS) & (d[None, :] < D)
    acc = tl.zeros((BLOCK_T, NPAD), dtype=tl.float32)
    sq = tl.zeros((BLOCK_T,), dtype=tl.float32)
    if FUSE_POST:
        xv = _sublayer_x(x_ptr, xa_ptr, ts[:, None].to(tl.int64) * D + d[None, :], m2, X_ROUND, X_ADD, INTERP)
        h0 = tl.load(h_ptr + hrow, mask=m2, other=0.0)
        h1 = tl.load(h_ptr + hrow + D, mask=m2, other=0.0)
        h2 = tl.load(h_ptr + hrow + 2 * D, mask=m2, other=0.0)
        h3 = tl.load(h_ptr + hrow + 3 * D, mask=m2, other=0.0)
    for jj in range(NJ):   # a loop, not unrolled: unrolling hoisted 4 fn tiles and spilled
        j = j0 + jj
        if FUSE_POST:   # h'_j = post_j x + sum_i comb[i][j] h_i, rounded to bf16 as stored
            cb = comb_ptr + ts * (_HC * _HC) + j
            hj = tl.load(post_ptr + ts * _HC + j, mask=tmask, other=0.0)[:, None] * xv
            hj += tl.load(cb, mask=tmask, other=0.0)[:, None] * h0.to(tl.float32)
            hj += tl.load(cb + _HC, mask=tmask, other=0.0)[:, None] * h1.to(tl.float32)
            hj += tl.load(cb + 2 * _HC, mask=tmask, other=0.0)[:, None] * h2.to(tl.float32)
            hj += tl.load(cb + 3 * _HC, mask=tmask, other=0.0)[:, None] * h3.to(tl.float32)
            hb = to_bf16(hj, INTERP)
            tl.store(hout_ptr + hrow + j * D, hb, mask=m2)
        else:
            hb = tl.load(h_ptr + hrow + j * D, mask=m2, other=0.0)
        hf = hb.to(tl.float32)
        sq += tl.sum(hf * hf, axis=1)
        # fn (fp32) = b1 + b2 + b3 exactly, each bf16: three bf16 tensor-core products of the exact
        # bf16 h give the fp32-accurate projection (tf32 would keep only 10 mantissa bits of fn).
        f = tl.load(fn_ptr + rows[:, None] * (_HC * D) + j * D + d[None, :], mask=fmask, other=0.0)
        b1 = f.to(tl.bfloat16)
        r1 = f - b1.to(tl.float32)
        b2 = r1.to(tl.bfloat16)
        b3 = (r1 - b2.to(tl.float32)).to(tl.bfloat16)
        a = dot_operand(hb, DOT_UPCAST)
        acc = tl.dot(a, dot_operand(tl.trans(b3), DOT_UPCAST), acc)
        acc = tl.dot(a, dot_operand(tl.trans(b2), DOT_UPCAST), acc)
        acc = tl.dot(a, dot_operand(tl.trans(b1), DOT_UPCAST), acc)
    wrow = ((s * tl.num_programs(2) + tl.program_id(2)) * T + ts).to(tl.int64)
    tl.store(ws_ptr + wrow[:, None] * NPAD + rows[None, :], acc, mask=tmask[:, None])
    tl.store(sq_ptr + wrow, sq, mask=tmask)


@triton.jit
def _mix_cols(h_ptr, t, d, D, pre, INTERP: tl.constexpr):
    """x[t, d] = sum_i pre_i h[t, i, d] for a column block d, rounded to bf16 (as stored), returned as fp32."""
    k = tl.arange(0, _HC)
    hv = tl.load(h_ptr + t.to(tl.int64) * (_HC * D) + k[:, None] * D + d[None, :], mask=d[None, :] < D,
                 other=0.0).to(tl.float32)
    return to_bf16(tl.sum(pre[:, None] * hv, axis=0), INTERP).to(tl.float32)


@triton.jit
def _mhc_mix(h_ptr, ws_ptr, sq_ptr, base_ptr, scale_ptr, x_ptr, post_ptr, comb_ptr, nw_ptr, nsq_ptr, cnt_ptr,
             # h (T, 4, D) bf16; ws (S, T, NPAD), sq (S, T) partials; base (ROWS,), scale (3,) or (1,) fp32
             # x (T, D) bf16 out; post (T, 4), comb (T, 4, 4) fp32 out (not written when HEAD)
             # NORM: x is rms_norm(x', nw (D,) bf16, rms_eps). Without SPLIT_NORM one program per token walks
             # D twice. SPLIT_NORM: grid (T, NB); nsq (T, NB) fp32 block sums of squares, cnt (T,) int32 zeros
             # on entry (left zero): the token's last program to finish normalizes x in place
             T, D, S, eps, norm_eps, rms_eps,
             ITERS: tl.constexpr, HEAD: tl.constexpr, NPAD: tl.constexpr, BLOCK_S: tl.constexpr,
             NCHUNK: tl.constexpr, BLOCK_MIX: tl.constexpr, NORM: tl.constexpr, SPLIT_NORM: tl.constexpr,
             NB_P2: tl.constexpr, BLOCK_FIN: tl.constexpr, INTERP: tl.constexpr):
    t = tl.program_id(0)
    pd = tl.program_id(1)
    k = tl.arange(0, _HC)
    ij = k[:, None] * _HC + k[None, :]
    sq = tl.zeros((BLOCK_S,), dtype=tl.float32)
    m_pre = tl.zeros((_HC,), dtype=tl.float32)
    m_post = tl.zeros((_HC,), dtype=tl.float32)
    mc = tl.zeros((_HC, _HC), dtype=tl.float32)
    for c in range(NCHUNK):   # the S partials, BLOCK_S at a time
        ss = c * BLOCK_S + tl.arange(0, BLOCK_S)
        smask = ss < S
        sq += tl.load(sq_ptr + ss * T + t, mask=smask, other=0.0)
        wrow = (ss * T + t).to(tl.int64) * NPAD
        m_pre += tl.sum(tl.load(ws_ptr + wrow[:, None] + k[None, :], mask=smask[:, None], other=0.0), axis=0)
        if not HEAD:
            m_post += tl.sum(tl.load(ws_ptr + wrow[:, None] + _HC + k[None, :], mask=smask[:, None], other=0.0),
                             axis=0)
            mc += tl.sum(tl.load(ws_ptr + wrow[:, None, None] + 2 * _HC + ij[None, :, :], mask=smask[:, None, None],
                                 other=0.0), axis=0)
    r = tl.rsqrt(tl.sum(sq, axis=0) / (_HC * D) + norm_eps)
    pre = tl.sigmoid(m_pre * r * tl.load(scale_ptr) + tl.load(base_ptr + k)) + eps
    if SPLIT_NORM:   # the last program of the row only runs Sinkhorn, beside the NB x' blocks
        nb = tl.num_programs(1) - 1
        sink = pd == nb
    else:            # one program of the row writes post and comb; the others skip Sinkhorn
        nb = tl.num_programs(1)
        sink = pd == 0
    if not HEAD:
        if sink:
            post = 2.0 * tl.sigmoid(m_post * r * tl.load(scale_ptr + 1) + tl.load(base_ptr + _HC + k))
            tl.store(post_ptr + t * _HC + k, post)
            mc = mc * r
            z = mc * tl.load(scale_ptr + 2) + tl.load(base_ptr + 2 * _HC + ij)
            e = tl.exp(z - tl.max(z, axis=1)[:, None])
            cm = e / tl.sum(e, axis=1)[:, None] + eps
            cm = cm / (tl.sum(cm, axis=0)[None, :] + eps)
            for _ in range(ITERS - 1):
                cm = cm / (tl.sum(cm, axis=1)[:, None] + eps)
                cm = cm / (tl.sum(cm, axis=0)[None, :] + eps)
            tl.store(comb_ptr + t * (_HC * _HC) + ij, cm)
    if NORM and SPLIT_NORM:
        if pd < nb:
            # this block of x' (bf16, as stored) and its sum of squares; the token's last program to arrive
            # (atomic ticket, acq_rel: every other block's stores are visible to it) sums the NB block sums in
            # block order (deterministic) and normalizes the whole row in place, then re-arms the counter
            d = pd * BLOCK_MIX + tl.arange(0, BLOCK_MIX)
            xb = _mix_cols(h_ptr, t, d, D, pre, INTERP)
            tl.store(x_ptr + t.to(tl.int64) * D + d, xb.to(tl.bfloat16), mask=d < D)
            tl.store(nsq_ptr + t * nb + pd, tl.sum(xb * xb, axis=0))
            tl.debug_barrier()
            ticket = tl.atomic_add(cnt_ptr + t, 1, sem="acq_rel")
            if ticket == nb - 1:
                b = tl.arange(0, NB_P2)
                parts = tl.load(nsq_ptr + t * nb + b, mask=b < nb, other=0.0, cache_modifier=".cg")
                rr = tl.rsqrt(tl.sum(parts, axis=0) / D + rms_eps)
                for d0 in range(0, D, BLOCK_FIN):
                    dd = d0 + tl.arange(0, BLOCK_FIN)
                    xr = tl.load(x_ptr + t.to(tl.int64) * D + dd, mask=dd < D, other=0.0, cache_modifier=".cg")
                    w = tl.load(nw_ptr + dd, mask=dd < D, other=0.0).to(tl.float32)
                    xn = to_bf16(w * (xr.to(tl.float32) * rr), INTERP)
                    tl.store(x_ptr + t.to(tl.int64) * D + dd, xn, mask=dd < D)
                tl.atomic_xchg(cnt_ptr + t, 0)
    elif NORM:    # pass 1: sum of squares of the bf16 x'; pass 2: recompute x' (h from L2), scale, store
        ssq = tl.zeros((BLOCK_MIX,), dtype=tl.float32)
        for d0 in range(0, D, BLOCK_MIX):
            xb = _mix_cols(h_ptr, t, d0 + tl.arange(0, BLOCK_MIX), D, pre, INTERP)
            ssq += xb * xb
        rr = tl.rsqrt(tl.sum(ssq, axis=0) / D + rms_eps)
        for d0 in range(0, D, BLOCK_MIX):
            d = d0 + tl.arange(0, BLOCK_MIX)
            xb = _mix_cols(h_ptr, t, d, D, pre, INTERP)
            w = tl.load(nw_ptr + d, mask=d < D, other=0.0).to(tl.float32)
            tl.store(x_ptr + t.to(tl.int64) * D + d, to_bf16(w * (xb * rr), INTERP), mask=d < D)
    else:
        d = pd * BLOCK_MIX + tl.arange(0, BLOCK_MIX)
        x = _mix_cols(h_ptr, t, d, D, pre, INTERP)
        tl.store(x_ptr + t.to(tl.int64) * D + d, x.to(tl.bfloat16), mask=d < D)


@triton.jit
def _mhc_post(x_ptr, xa_ptr, h_ptr, post_ptr, comb_ptr, out_ptr,   # x, xa (T, D): _sublayer_x; h, out (T, 4, D) bf16;
              D, BLOCK_D: tl.constexpr, INTERP: tl.constexpr,      # post, comb fp32
              X_ROUND: tl.constexpr = False, X_ADD: tl.constexpr = False):
    t = tl.program_id(0).to(tl.int64)
    d = tl.program_id(1) * BLOCK_D + tl.arange(0, BLOCK_D)
    k = tl.arange(0, _HC)
    dmask = d < D
    xv = _sublayer_x(x_ptr, xa_ptr, t * D + d, dmask, X_ROUND, X_ADD, INTERP)
    acc = tl.load(post_ptr + t * _HC + k)[:, None] * xv[None, :]            # (4 = j, BLOCK_D)
    for i in tl.static_range(_HC):
        hi = tl.load(h_ptr + t * (_HC * D) + i * D + d, mask=dmask, other=0.0).to(tl.float32)
        acc += tl.load(comb_ptr + t * (_HC * _HC) + i * _HC + k)[:, None] * hi[None, :]
    tl.store(out_ptr + t * (_HC * D) + k[:, None] * D + d[None, :], to_bf16(acc, INTERP),
             mask=dmask[None, :])


# one-launch / two-launch version (impl "triton_v3"; the kernels above are impl "triton_v2") --------------
@triton.jit
def _pick(v, rows, r: tl.constexpr):
    """Element r of a small vector as a scalar (a reduction over its few lanes, no barrier)."""
    return tl.sum(tl.where(rows == r, v, 0.0), axis=0)


@triton.jit
def _rcp(x, INTERP: tl.constexpr):
    """1 / x for x in the normal range: compiled, one MUFU.RCP (rcp.approx.ftz, <= 1 ulp) without the range
    fix-ups of the division."""
    if INTERP:
        r = 1.0 / x
    else:
        r = tl.inline_asm_elementwise("rcp.approx.ftz.f32 $0, $1;", "=r,r", [x], dtype=tl.float32, is_pure=True,
                                      pack=1)
    return r


@triton.jit
def _norm4(a, b, c, d, eps, FAST: tl.constexpr = False, INTERP: tl.constexpr = False):
    """Four scalars divided by (their sum + eps): one row or column step of Sinkhorn. FAST: a pairwise sum and
    one approximate reciprocal (the sums lie in [eps, 4]) times four products: a shorter dependent chain,
    within ~2 ulp of the four divisions."""
    if FAST:
        inv = _rcp((a + b) + (c + d) + eps, INTERP)
        return a * inv, b * inv, c * inv, d * inv
    s = a + b + c + d + eps
    return a / s, b / s, c / s, d / s


@triton.jit
def _softmax4(z0, z1, z2, z3, eps):
    mx = tl.maximum(tl.maximum(z0, z1), tl.maximum(z2, z3))
    e0 = tl.exp(z0 - mx)
    e1 = tl.exp(z1 - mx)
    e2 = tl.exp(z2 - mx)
    e3 = tl.exp(z3 - mx)
    s = e0 + e1 + e2 + e3
    return e0 / s + eps, e1 / s + eps, e2 / s + eps, e3 / s + eps


@triton.jit
def _logit(acc, rows, r: tl.constexpr, rn, sc, base_ptr):
    return _pick(acc, rows, r) * rn * sc + tl.load(base_ptr + r)


@triton.jit
def _sinkhorn_store(acc, rows, rn, base_ptr, scale_ptr, post_ptr, comb_ptr, t, eps, ITERS: tl.constexpr,
                    FAST: tl.constexpr = False, INTERP: tl.constexpr = False):
    """post and comb of one token from its summed logits `acc` (rows 4..23), as scalars: Sinkhorn's 4 x 4
    matrix is 16 registers of every thread, its row and column sums are plain adds (no shuffle, no barrier)."""
    s1 = tl.load(scale_ptr + 1)
    s2 = tl.load(scale_ptr + 2)
    pb = post_ptr + t * _HC
    tl.store(pb, 2.0 * tl.sigmoid(_logit(acc, rows, 4, rn, s1, base_ptr)))
    tl.store(pb + 1, 2.0 * tl.sigmoid(_logit(acc, rows, 5, rn, s1, base_ptr)))
    tl.store(pb + 2, 2.0 * tl.sigmoid(_logit(acc, rows, 6, rn, s1, base_ptr)))
    tl.store(pb + 3, 2.0 * tl.sigmoid(_logit(acc, rows, 7, rn, s1, base_ptr)))
    # row i of comb: logits 8 + 4i .. 11 + 4i; c<i><j> = comb[i][j]
    c00, c01, c02, c03 = _softmax4(_logit(acc, rows, 8, rn, s2, base_ptr), _logit(acc, rows, 9, rn, s2, base_ptr),
                                   _logit(acc, rows, 10, rn, s2, base_ptr), _logit(acc, rows, 11, rn, s2, base_ptr), eps)
    c10, c11, c12, c13 = _softmax4(_logit(acc, rows, 12, rn, s2, base_ptr), _logit(acc, rows, 13, rn, s2, base_ptr),
                                   _logit(acc, rows, 14, rn, s2, base_ptr), _logit(acc, rows, 15, rn, s2, base_ptr), eps)
    c20, c21, c22, c23 = _softmax4(_logit(acc, rows, 16, rn, s2, base_ptr), _logit(acc, rows, 17, rn, s2, base_ptr),
                                   _logit(acc, rows, 18, rn, s2, base_ptr), _logit(acc, rows, 19, rn, s2, base_ptr), eps)
    c30, c31, c32, c33 = _softmax4(_logit(acc, rows, 20, rn, s2, base_ptr), _logit(acc, rows, 21, rn, s2, base_ptr),
                                   _logit(acc, rows, 22, rn, s2, base_ptr), _logit(acc, rows, 23, rn, s2, base_ptr), eps)
    c00, c10, c20, c30 = _norm4(c00, c10, c20, c30, eps, FAST, INTERP)
    c01, c11, c21, c31 = _norm4(c01, c11, c21, c31, eps, FAST, INTERP)
    c02, c12, c22, c32 = _norm4(c02, c12, c22, c32, eps, FAST, INTERP)
    c03, c13, c23, c33 = _norm4(c03, c13, c23, c33, eps, FAST, INTERP)
    for _ in range(ITERS - 1):
        c00, c01, c02, c03 = _norm4(c00, c01, c02, c03, eps, FAST, INTERP)
        c10, c11, c12, c13 = _norm4(c10, c11, c12, c13, eps, FAST, INTERP)
        c20, c21, c22, c23 = _norm4(c20, c21, c22, c23, eps, FAST, INTERP)
        c30, c31, c32, c33 = _norm4(c30, c31, c32, c33, eps, FAST, INTERP)
        c00, c10, c20, c30 = _norm4(c00, c10, c20, c30, eps, FAST, INTERP)
        c01, c11, c21, c31 = _norm4(c01, c11, c21, c31, eps, FAST, INTERP)
        c02, c12, c22, c32 = _norm4(c02, c12, c22, c32, eps, FAST, INTERP)
        c03, c13, c23, c33 = _norm4(c03, c13, c23, c33, eps, FAST, INTERP)
    cb = comb_ptr + t * (_HC * _HC)
    tl.store(cb, c00)
    tl.store(cb + 1, c01)
    tl.store(cb + 2, c02)
    tl.store(cb + 3, c03)
    tl.store(cb + 4, c10)
    tl.store(cb + 5, c11)
    tl.store(cb + 6, c12)
    tl.store(cb + 7, c13)
    tl.store(cb + 8, c20)
    tl.store(cb + 9, c21)
    tl.store(cb + 10, c22)
    tl.store(cb + 11, c23)
    tl.store(cb + 12, c30)
    tl.store(cb + 13, c31)
    tl.store(cb + 14, c32)
    tl.store(cb + 15, c33)


@triton.jit
def _mix4(hrow, d, dmask, D, p0, p1, p2, p3, INTERP: tl.constexpr):
    """x'[d] = sum_i p_i h[i, d] (fp32, streams read through L2: other programs wrote them), rounded to
    bf16 as stored, returned as fp32."""
    x = p0 * tl.load(hrow + d, mask=dmask, other=0.0, cache_modifier=".cg").to(tl.float32)
    x += p1 * tl.load(hrow + D + d, mask=dmask, other=0.0, cache_modifier=".cg").to(tl.float32)
    x += p2 * tl.load(hrow + 2 * D + d, mask=dmask, other=0.0, cache_modifier=".cg").to(tl.float32)
    x += p3 * tl.load(hrow + 3 * D + d, mask=dmask, other=0.0, cache_modifier=".cg").to(tl.float32)
    return to_bf16(x, INTERP).to(tl.float32)


@triton.jit
def _token_tail(t, h_ptr, ws_ptr, base_ptr, scale_ptr, x_ptr, post_ptr, comb_ptr, nw_ptr, D, S,
                eps, norm_eps, rms_eps, ROWS: tl.constexpr, NPAD: tl.constexpr, ITERS: tl.constexpr,
                HEAD: tl.constexpr, NORM: tl.constexpr, BLOCK_S: tl.constexpr, BLOCK_FIN: tl.constexpr,
                ONE_PASS: tl.constexpr, INTERP: tl.constexpr):
    """Everything of one token after the projection: sum its S partials (ws (T, S, NPAD): rows 0..ROWS-1 of m,
    column ROWS the sum of squares) in split order (deterministic), the sigmoid split, Sinkhorn (post and comb
    stored), x' = sum_i pre_i h_i over the whole row and, with NORM, x = w * x' * rsqrt(mean(x'^2) + rms_eps)
    of the bf16 x' (ONE_PASS: the row is one BLOCK_FIN block held in registers; else x' is stored, then
    read back and normalized)."""
    t = tl.cast(t, tl.int64)   # a loop index (a Python int in the interpreter)
    rows = tl.arange(0, NPAD)
    acc = tl.zeros((NPAD,), dtype=tl.float32)
    wrow = ws_ptr + t * S * NPAD
    for s0 in range(0, S, BLOCK_S):
        ss = s0 + tl.arange(0, BLOCK_S)
        part = tl.load(wrow + ss[:, None] * NPAD + rows[None, :], mask=ss[:, None] < S, other=0.0,
                       cache_modifier=".cg")
        acc += tl.sum(part, axis=0)
    rn = tl.rsqrt(_pick(acc, rows, ROWS) / (_HC * D) + norm_eps)
    sc = tl.load(scale_ptr)
    p0 = tl.sigmoid(_logit(acc, rows, 0, rn, sc, base_ptr)) + eps
    p1 = tl.sigmoid(_logit(acc, rows, 1, rn, sc, base_ptr)) + eps
    p2 = tl.sigmoid(_logit(acc, rows, 2, rn, sc, base_ptr)) + eps
    p3 = tl.sigmoid(_logit(acc, rows, 3, rn, sc, base_ptr)) + eps
    hrow = h_ptr + t * (_HC * D)
    xrow = x_ptr + t * D
    if ONE_PASS:
        d = tl.arange(0, BLOCK_FIN)
        dm = d < D
        xb = _mix4(hrow, d, dm, D, p0, p1, p2, p3, INTERP)
        if NORM:
            rr = tl.rsqrt(tl.sum(xb * xb, axis=0) / D + rms_eps)
            w = tl.load(nw_ptr + d, mask=dm, other=0.0).to(tl.float32)
            tl.store(xrow + d, to_bf16(w * (xb * rr), INTERP), mask=dm)
        else:
            tl.store(xrow + d, xb.to(tl.bfloat16), mask=dm)
    else:
        ssq = tl.zeros((BLOCK_FIN,), dtype=tl.float32)
        for d0 in range(0, D, BLOCK_FIN):
            d = d0 + tl.arange(0, BLOCK_FIN)
            xb = _mix4(hrow, d, d < D, D, p0, p1, p2, p3, INTERP)
            tl.store(xrow + d, xb.to(tl.bfloat16), mask=d < D)
            ssq += xb * xb
        if NORM:
            tl.debug_barrier()   # every thread's x' block is stored before any is read back
            rr = tl.rsqrt(tl.sum(ssq, axis=0) / D + rms_eps)
            for d0 in range(0, D, BLOCK_FIN):
                d = d0 + tl.arange(0, BLOCK_FIN)
                xr = tl.load(xrow + d, mask=d < D, other=0.0).to(tl.float32)
                w = tl.load(nw_ptr + d, mask=d < D, other=0.0).to(tl.float32)
                tl.store(xrow + d, to_bf16(w * (xr * rr), INTERP), mask=d < D)
    if not HEAD:
        _sinkhorn_store(acc, rows, rn, base_ptr, scale_ptr, post_ptr, comb_ptr, t, eps, ITERS)


@triton.jit
def _proj_tiles(tb, s, T, D, ROWS, BLOCK_T: tl.constexpr, BLOCK_D: tl.constexpr, NPAD: tl.constexpr,
                SIMT: tl.constexpr):
    """The projection kernels' index tensors for token block tb and column block s: [BLOCK_T, BLOCK_D] h tiles and
    [NPAD, BLOCK_D] fn tiles for the MMA; with SIMT everything is built in the [BLOCK_T, NPAD, BLOCK_D] product's
    space ([BLOCK_T, 1, BLOCK_D] and [1, NPAD, BLOCK_D]), so no tile changes layout (each change went through
    shared memory with a barrier). -> (ts, tmask, rows, tok, tm, col, frow, h/x mask, h row offsets, fn mask)."""
    ts = tb * BLOCK_T + tl.arange(0, BLOCK_T)
    d = s * BLOCK_D + tl.arange(0, BLOCK_D)
    rows = tl.arange(0, NPAD)
    tmask = ts < T
    if SIMT:
        tok = ts[:, None, None]
        tm = tmask[:, None, None]
        col = d[None, None, :]
        frow = rows[None, :, None]
    else:
        tok = ts[:, None]
        tm = tmask[:, None]
        col = d[None, :]
        frow = rows[:, None]
    return (ts, tmask, rows, tok, tm, col, frow, tm & (col < D), tok.to(tl.int64) * (_HC * D) + col,
            (frow < ROWS) & (col < D))


@triton.jit
def _mhc_proj1(h_ptr, x_ptr, xa_ptr, post_ptr, comb_ptr, hout_ptr, fn_ptr, ws_ptr, cnt_ptr,
               base_ptr, scale_ptr, xo_ptr, posto_ptr, combo_ptr, nw_ptr,
               # h, hout (T, 4, D) bf16; x, xa (T, D) (_sublayer_x); post (T, 4), comb (T, 4, 4), fn (ROWS, 4D) fp32 (inputs)
               # ws (T, S, NPAD) fp32 partials; cnt (>= T / BLOCK_T) int32 zeros (ONE); xo (T, D) bf16,
               # posto (T, 4), combo (T, 4, 4) fp32 (outputs, ONE); nw (D,) bf16 norm weight (NORM)
               T, D, S, eps, norm_eps, rms_eps,
               ROWS: tl.constexpr, NPAD: tl.constexpr, FUSE_POST: tl.constexpr, ONE: tl.constexpr,
               HEAD: tl.constexpr, NORM: tl.constexpr, ITERS: tl.constexpr, BLOCK_T: tl.constexpr,
               BLOCK_D: tl.constexpr, BLOCK_S: tl.constexpr, BLOCK_FIN: tl.constexpr, ONE_PASS: tl.constexpr,
               SIMT: tl.constexpr, DOT_UPCAST: tl.constexpr, INTERP: tl.constexpr, X_ROUND: tl.constexpr = False,
               X_ADD: tl.constexpr = False):
    """Grid (ceil(T / BLOCK_T), S = ceil(D / BLOCK_D)): the projection of BLOCK_D columns of all four streams
    (unrolled, so the four fn tiles are loaded together; SIMT: fp32 FMAs, else bf16 MMAs), with FUSE_POST h'
    formed from x and h and stored first. Its partial m and sum of squares go to ws[t, s]. ONE: the token block's last
    program to arrive (ticket, acq_rel) runs `_token_tail` for each of its tokens, then re-arms the ticket."""
    tb = tl.program_id(0)
    s = tl.program_id(1)
    ts, tmask, rows, tok, tm, col, frow, m2, hrow, fmask = _proj_tiles(tb, s, T, D, ROWS, BLOCK_T, BLOCK_D, NPAD,
                                                                       SIMT)
    acc = tl.zeros((BLOCK_T, NPAD), dtype=tl.float32)
    acc3 = tl.zeros((BLOCK_T, NPAD, BLOCK_D) if SIMT else (1, 1, 1), dtype=tl.float32)
    sq = tl.zeros((BLOCK_T,), dtype=tl.float32)
    if FUSE_POST:
        xv = _sublayer_x(x_ptr, xa_ptr, tok.to(tl.int64) * D + col, m2, X_ROUND, X_ADD, INTERP)
        h0 = tl.load(h_ptr + hrow, mask=m2, other=0.0).to(tl.float32)
        h1 = tl.load(h_ptr + hrow + D, mask=m2, other=0.0).to(tl.float32)
        h2 = tl.load(h_ptr + hrow + 2 * D, mask=m2, other=0.0).to(tl.float32)
        h3 = tl.load(h_ptr + hrow + 3 * D, mask=m2, other=0.0).to(tl.float32)
    for j in tl.static_range(_HC):
        if FUSE_POST:   # h'_j = post_j x + sum_i comb[i][j] h_i, rounded to bf16 as stored
            cb = comb_ptr + tok * (_HC * _HC) + j
            hj = tl.load(post_ptr + tok * _HC + j, mask=tm, other=0.0) * xv
            hj += tl.load(cb, mask=tm, other=0.0) * h0
            hj += tl.load(cb + _HC, mask=tm, other=0.0) * h1
            hj += tl.load(cb + 2 * _HC, mask=tm, other=0.0) * h2
            hj += tl.load(cb + 3 * _HC, mask=tm, other=0.0) * h3
            hb = to_bf16(hj, INTERP)
            tl.store(hout_ptr + hrow + j * D, hb, mask=m2)
        else:
            hb = tl.load(h_ptr + hrow + j * D, mask=m2, other=0.0)
        hf = hb.to(tl.float32)
        f = tl.load(fn_ptr + frow * (_HC * D) + j * D + col, mask=fmask, other=0.0)
        if SIMT:   # fp32 FMAs, summed over the columns once after the four streams (small BLOCK_T only)
            sq += tl.sum(tl.sum(hf * hf, axis=2), axis=1)
            acc3 += f * hf
        else:
            sq += tl.sum(hf * hf, axis=1)
            # fn (fp32) = b1 + b2 + b3 exactly, each bf16: three bf16 tensor-core products of the exact bf16 h
            b1 = f.to(tl.bfloat16)
            r1 = f - b1.to(tl.float32)
            b2 = r1.to(tl.bfloat16)
            b3 = (r1 - b2.to(tl.float32)).to(tl.bfloat16)
            a = dot_operand(hb, DOT_UPCAST)
            acc = tl.dot(a, dot_operand(tl.trans(b3), DOT_UPCAST), acc)
            acc = tl.dot(a, dot_operand(tl.trans(b2), DOT_UPCAST), acc)
            acc = tl.dot(a, dot_operand(tl.trans(b1), DOT_UPCAST), acc)
    if SIMT:
        acc = tl.sum(acc3, axis=2)
    acc = tl.where(rows[None, :] == ROWS, sq[:, None], acc)     # column ROWS (padding) carries the sum of squares
    tl.store(ws_ptr + (ts[:, None].to(tl.int64) * S + s) * NPAD + rows[None, :], acc, mask=tmask[:, None])
    if ONE:
        tl.debug_barrier()   # every thread's partial (and h') is stored before the release
        ticket = tl.atomic_add(cnt_ptr + tb, 1, sem="acq_rel", scope="gpu")
        if ticket == S - 1:
            hsrc = hout_ptr if FUSE_POST else h_ptr
            for t in range(tb * BLOCK_T, tl.minimum(T, tb * BLOCK_T + BLOCK_T)):
                _token_tail(t, hsrc, ws_ptr, base_ptr, scale_ptr, xo_ptr, posto_ptr, combo_ptr, nw_ptr, D, S,
                            eps, norm_eps, rms_eps, ROWS, NPAD, ITERS, HEAD, NORM, BLOCK_S, BLOCK_FIN, ONE_PASS,
                            INTERP)
            tl.atomic_xchg(cnt_ptr + tb, 0, sem="relaxed", scope="gpu")   # zero for the next launch


@triton.jit
def _mhc_tail(h_ptr, ws_ptr, base_ptr, scale_ptr, x_ptr, post_ptr, comb_ptr, nw_ptr, D, S, eps, norm_eps, rms_eps,
              ROWS: tl.constexpr, NPAD: tl.constexpr, ITERS: tl.constexpr, HEAD: tl.constexpr, NORM: tl.constexpr,
              BLOCK_S: tl.constexpr, BLOCK_FIN: tl.constexpr, ONE_PASS: tl.constexpr, INTERP: tl.constexpr):
    """Grid (T,): `_token_tail` for token program_id(0) (the second launch when ONE is off)."""
    _token_tail(tl.program_id(0), h_ptr, ws_ptr, base_ptr, scale_ptr, x_ptr, post_ptr, comb_ptr, nw_ptr, D, S,
                eps, norm_eps, rms_eps, ROWS, NPAD, ITERS, HEAD, NORM, BLOCK_S, BLOCK_FIN, ONE_PASS, INTERP)


# impl "triton" (mhc_head: "triton_v4"): `_mhc_proj4` + `_mhc_fin4`, each one dependent memory round trip ---------
@triton.jit
def _post_stream(j: tl.constexpr, xv, h0, h1, h2, h3, post_ptr, comb_ptr, tok, tm, INTERP: tl.constexpr):
    """h'_j = post_j x + sum_i comb[i][j] h_i (fp32), rounded to bf16 as stored."""
    cb = comb_ptr + tok * (_HC * _HC) + j
    hj = tl.load(post_ptr + tok * _HC + j, mask=tm, other=0.0) * xv
    hj += tl.load(cb, mask=tm, other=0.0) * h0
    hj += tl.load(cb + _HC, mask=tm, other=0.0) * h1
    hj += tl.load(cb + 2 * _HC, mask=tm, other=0.0) * h2
    hj += tl.load(cb + 3 * _HC, mask=tm, other=0.0) * h3
    return to_bf16(hj, INTERP)


@triton.jit
def _colsum(a, SIMT: tl.constexpr):
    """Per-token sum over the columns of a [BLOCK_T, BLOCK_D] tile (SIMT: a [BLOCK_T, 1, BLOCK_D] tile)."""
    if SIMT:
        r = tl.sum(tl.sum(a, axis=2), axis=1)
    else:
        r = tl.sum(a, axis=1)
    return r


@triton.jit
def _mma3(acc, hb, f, DOT_UPCAST: tl.constexpr):
    """acc += hb @ f^T with fp32 accuracy on tensor cores: fn (fp32) = b1 + b2 + b3 exactly, each bf16, and h is
    exactly bf16: three bf16 MMAs with fp32 accumulation (tf32 would keep 10 mantissa bits of fn)."""
    b1 = f.to(tl.bfloat16)
    r1 = f - b1.to(tl.float32)
    b2 = r1.to(tl.bfloat16)
    b3 = (r1 - b2.to(tl.float32)).to(tl.bfloat16)
    a = dot_operand(hb, DOT_UPCAST)
    acc = tl.dot(a, dot_operand(tl.trans(b3), DOT_UPCAST), acc)
    acc = tl.dot(a, dot_operand(tl.trans(b2), DOT_UPCAST), acc)
    return tl.dot(a, dot_operand(tl.trans(b1), DOT_UPCAST), acc)


@triton.jit
def _mhc_proj4(h_ptr, x_ptr, xa_ptr, post_ptr, comb_ptr, hout_ptr, fn_ptr, ws_ptr,
               # h, hout (T, 4, D) bf16; x, xa (T, D) (_sublayer_x); post (T, 4), comb (T, 4, 4), fn (ROWS, 4D) fp32;
               # ws (T, S, NPAD) fp32 partials: m (ROWS columns), sum of squares (column ROWS)
               T, D, S,
               ROWS: tl.constexpr, NPAD: tl.constexpr, FUSE_POST: tl.constexpr, BLOCK_T: tl.constexpr,
               BLOCK_D: tl.constexpr, SIMT: tl.constexpr, RELOAD: tl.constexpr, DOT_UPCAST: tl.constexpr,
               INTERP: tl.constexpr, X_ROUND: tl.constexpr = False, X_ADD: tl.constexpr = False,
               PDL: tl.constexpr = False):
    """Grid (ceil(T / BLOCK_T), S = ceil(D / BLOCK_D)): BLOCK_D columns of all four streams. Every load (the four
    fn tiles, x and h) is issued before any use, so a program is one memory round trip; with FUSE_POST h' is
    formed and stored first. The projection is fp32 FMAs in a [BLOCK_T, NPAD, BLOCK_D] product (SIMT) or three
    bf16 MMAs per stream; the partial sum of squares goes to column ROWS beside the partial m."""
    s = tl.program_id(1)
    ts, tmask, rows, tok, tm, col, frow, m2, hrow, fmask = _proj_tiles(tl.program_id(0), s, T, D, ROWS, BLOCK_T,
                                                                       BLOCK_D, NPAD, SIMT)
    fp = fn_ptr + frow * (_HC * D) + col
    f0 = tl.load(fp, mask=fmask, other=0.0)
    f1 = tl.load(fp + D, mask=fmask, other=0.0)
    f2 = tl.load(fp + 2 * D, mask=fmask, other=0.0)
    f3 = tl.load(fp + 3 * D, mask=fmask, other=0.0)
    pdl_enter(PDL)                                    # PDL: the fn weights are in flight, now wait for h and x
    if FUSE_POST:
        xv = _sublayer_x(x_ptr, xa_ptr, tok.to(tl.int64) * D + col, m2, X_ROUND, X_ADD, INTERP)
        h0 = tl.load(h_ptr + hrow, mask=m2, other=0.0).to(tl.float32)
        h1 = tl.load(h_ptr + hrow + D, mask=m2, other=0.0).to(tl.float32)
        h2 = tl.load(h_ptr + hrow + 2 * D, mask=m2, other=0.0).to(tl.float32)
        h3 = tl.load(h_ptr + hrow + 3 * D, mask=m2, other=0.0).to(tl.float32)
        b0 = _post_stream(0, xv, h0, h1, h2, h3, post_ptr, comb_ptr, tok, tm, INTERP)
        b1 = _post_stream(1, xv, h0, h1, h2, h3, post_ptr, comb_ptr, tok, tm, INTERP)
        b2 = _post_stream(2, xv, h0, h1, h2, h3, post_ptr, comb_ptr, tok, tm, INTERP)
        b3 = _post_stream(3, xv, h0, h1, h2, h3, post_ptr, comb_ptr, tok, tm, INTERP)
        tl.store(hout_ptr + hrow, b0, mask=m2)
        tl.store(hout_ptr + hrow + D, b1, mask=m2)
        tl.store(hout_ptr + hrow + 2 * D, b2, mask=m2)
        tl.store(hout_ptr + hrow + 3 * D, b3, mask=m2)
        if RELOAD:   # the MMA operands read back from the stored h' (a layout of their own, not the post's)
            tl.debug_barrier()
            b0 = tl.load(hout_ptr + hrow, mask=m2, other=0.0, cache_modifier=".cg")
            b1 = tl.load(hout_ptr + hrow + D, mask=m2, other=0.0, cache_modifier=".cg")
            b2 = tl.load(hout_ptr + hrow + 2 * D, mask=m2, other=0.0, cache_modifier=".cg")
            b3 = tl.load(hout_ptr + hrow + 3 * D, mask=m2, other=0.0, cache_modifier=".cg")
    else:
        b0 = tl.load(h_ptr + hrow, mask=m2, other=0.0)
        b1 = tl.load(h_ptr + hrow + D, mask=m2, other=0.0)
        b2 = tl.load(h_ptr + hrow + 2 * D, mask=m2, other=0.0)
        b3 = tl.load(h_ptr + hrow + 3 * D, mask=m2, other=0.0)
    g0 = b0.to(tl.float32)
    g1 = b1.to(tl.float32)
    g2 = b2.to(tl.float32)
    g3 = b3.to(tl.float32)
    if SIMT:
        acc = tl.sum(f0 * g0 + f1 * g1 + f2 * g2 + f3 * g3, axis=2)
    else:
        acc = tl.zeros((BLOCK_T, NPAD), dtype=tl.float32)
        acc = _mma3(acc, b0, f0, DOT_UPCAST)
        acc = _mma3(acc, b1, f1, DOT_UPCAST)
        acc = _mma3(acc, b2, f2, DOT_UPCAST)
        acc = _mma3(acc, b3, f3, DOT_UPCAST)
    sq = _colsum(g0 * g0 + g1 * g1 + g2 * g2 + g3 * g3, SIMT)
    acc = tl.where(rows[None, :] == ROWS, sq[:, None], acc)     # column ROWS (padding) carries the sum of squares
    tl.store(ws_ptr + (ts[:, None].to(tl.int64) * S + s) * NPAD + rows[None, :], acc, mask=tmask[:, None])


@triton.jit
def _mhc_fin4(h_ptr, ws_ptr, base_ptr, scale_ptr, x_ptr, post_ptr, comb_ptr, nw_ptr,
              # h (T, 4, D) bf16 (h' after a fused post); ws (T, S, NPAD) partials of `_mhc_proj4`; base (ROWS,),
              # scale (3,) or (1,) fp32; x (T, D) bf16 out; post (T, 4), comb (T, 4, 4) fp32 out; nw (D,) bf16 (NORM)
              D, S, eps, norm_eps, rms_eps,
              ROWS: tl.constexpr, NPAD: tl.constexpr, ITERS: tl.constexpr, HEAD: tl.constexpr, NORM: tl.constexpr,
              BLOCK_S: tl.constexpr, BLOCK_MIX: tl.constexpr, INTERP: tl.constexpr, PDL: tl.constexpr = False):
    """Grid (T, NB + 1) (HEAD: (T, NB)), NB = ceil(D / BLOCK_MIX) (NORM: BLOCK_MIX >= D, NB = 1). Program pd < NB
    of token t writes x[t] for its BLOCK_MIX columns: it issues its h loads, sums the token's S partials of m_0..3
    and of the sum of squares in split order (every program the same order: deterministic) and forms pre and x';
    with NORM it holds the whole row: x = w * x' * rsqrt(mean(x'^2) + rms_eps) of the bf16 x' in registers (no
    second pass, no cross-program join). Program NB (not HEAD) writes post and comb (Sinkhorn on sixteen scalars
    per thread), beside the x programs."""
    pdl_enter(PDL)
    t = tl.program_id(0).to(tl.int64)
    pd = tl.program_id(1)
    d = pd * BLOCK_MIX + tl.arange(0, BLOCK_MIX)
    dm = d < D                        # all false in the Sinkhorn program
    hrow = h_ptr + t * (_HC * D)
    hv0 = tl.load(hrow + d, mask=dm, other=0.0).to(tl.float32)
    hv1 = tl.load(hrow + D + d, mask=dm, other=0.0).to(tl.float32)
    hv2 = tl.load(hrow + 2 * D + d, mask=dm, other=0.0).to(tl.float32)
    hv3 = tl.load(hrow + 3 * D + d, mask=dm, other=0.0).to(tl.float32)
    if NORM:
        w = tl.load(nw_ptr + d, mask=dm, other=0.0).to(tl.float32)
    wrow = ws_ptr + t * S * NPAD
    sc = tl.load(scale_ptr)
    if pd < tl.cdiv(D, BLOCK_MIX):
        k = tl.arange(0, _HC)
        mp = tl.zeros((_HC,), dtype=tl.float32)
        sqa = tl.zeros((BLOCK_S,), dtype=tl.float32)
        for s0 in range(0, S, BLOCK_S):   # only what x needs: partial m_0..3 and the sum of squares
            ss = s0 + tl.arange(0, BLOCK_S)
            sm = ss < S
            mp += tl.sum(tl.load(wrow + ss[:, None] * NPAD + k[None, :], mask=sm[:, None], other=0.0), axis=0)
            sqa += tl.load(wrow + ss * NPAD + ROWS, mask=sm, other=0.0)
        rn = tl.rsqrt(tl.sum(sqa, axis=0) / (_HC * D) + norm_eps)
        p0 = tl.sigmoid(_logit(mp, k, 0, rn, sc, base_ptr)) + eps
        p1 = tl.sigmoid(_logit(mp, k, 1, rn, sc, base_ptr)) + eps
        p2 = tl.sigmoid(_logit(mp, k, 2, rn, sc, base_ptr)) + eps
        p3 = tl.sigmoid(_logit(mp, k, 3, rn, sc, base_ptr)) + eps
        xb = to_bf16(p0 * hv0 + p1 * hv1 + p2 * hv2 + p3 * hv3, INTERP)
        if NORM:   # the whole row is this block: the norm of the bf16 x', as the reference
            xf = xb.to(tl.float32)
            rr = tl.rsqrt(tl.sum(xf * xf, axis=0) / D + rms_eps)
            tl.store(x_ptr + t * D + d, to_bf16(w * (xf * rr), INTERP), mask=dm)
        else:
            tl.store(x_ptr + t * D + d, xb, mask=dm)
    elif not HEAD:
        rows = tl.arange(0, NPAD)
        acc = tl.zeros((NPAD,), dtype=tl.float32)
        for s0 in range(0, S, BLOCK_S):
            ss = s0 + tl.arange(0, BLOCK_S)
            acc += tl.sum(tl.load(wrow + ss[:, None] * NPAD + rows[None, :], mask=ss[:, None] < S, other=0.0), axis=0)
        rn = tl.rsqrt(_pick(acc, rows, ROWS) / (_HC * D) + norm_eps)
        _sinkhorn_store(acc, rows, rn, base_ptr, scale_ptr, post_ptr, comb_ptr, t, eps, ITERS, True, INTERP)

# wrappers ----------------------------------------------------------------------------------------
def _check_h(name: str, h: torch.Tensor) -> tuple[int, int]:
    check_dtype(f"{name}: h", h, torch.bfloat16)
    if h.dim() != 3 or h.shape[1] != HC:
        raise ValueError(f"{name}: h must be [T, {HC}, D], got shape {tuple(h.shape)}")
    return h.shape[0], h.shape[2]


def _check_proj(name, d, fn, base, scale, rows, nscale):
    for what, tensor in (("fn", fn), ("base", base), ("scale", scale)):
        check_dtype(f"{name}: {what}", tensor, torch.float32)
    check_shape(f"{name}: fn", fn, (rows, HC * d))
    check_shape(f"{name}: base", base, (rows,))
    check_shape(f"{name}: scale", scale, (nscale,))


def _check_post(name, t, d, x, post, comb, x_add=None):
    """A fused post's inputs: x [T, D] bf16 or fp32, x_add [T, D] bf16 or None (reference/mhc.py sublayer_output)."""
    if x.dtype not in (torch.bfloat16, torch.float32):
        raise TypeError(f"{name}: x must be bfloat16 or float32, got {x.dtype}")
    if x_add is not None:
        check_dtype(f"{name}: x_add", x_add, torch.bfloat16)
        check_shape(f"{name}: x_add", x_add, (t, d))
    check_dtype(f"{name}: post", post, torch.float32)
    check_dtype(f"{name}: comb", comb, torch.float32)
    check_shape(f"{name}: x", x, (t, d))
    check_shape(f"{name}: post", post, (t, HC))
    check_shape(f"{name}: comb", comb, (t, HC, HC))


def _post_args(fuse, h):
    """A fused post's kernel arguments (x, xa, post, comb) and constexprs (X_ROUND, X_ADD) from fuse = (x, post,
    comb, x_add); without one, h stands in for the unused pointers."""
    if fuse is None:
        return (h, h, h, h), {}
    x, post, comb, x_add = fuse
    add = x_add is not None
    return ((x.contiguous(), x_add.contiguous() if add else x, post.contiguous(), comb.contiguous()),
            {"X_ROUND": add or x.dtype == torch.float32, "X_ADD": add})


def _project(h, fn, rows, npad, cfg, fuse=None):
    """Launch `_mhc_proj`; returns (ws, sq, S, h_out)."""
    t, _, d = h.shape
    nj = cfg.get("NJ", HC)
    if nj not in (1, 2, 4):
        raise ValueError(f"config NJ (streams per projection program) must be 1, 2 or 4, got {nj}")
    groups = HC // nj
    s = triton.cdiv(d, cfg["BLOCK_D"]) * groups
    ws = torch.empty((s, t, npad), dtype=torch.float32, device=h.device)
    sq = torch.empty((s, t), dtype=torch.float32, device=h.device)
    hout = h if fuse is None else torch.empty_like(h)
    args, xk = _post_args(fuse, h)
    _mhc_proj[(triton.cdiv(t, cfg["BLOCK_T"]), s // groups, groups)](
        h, *args, hout, fn, ws, sq, t, d, rows,
        FUSE_POST=fuse is not None, BLOCK_T=cfg["BLOCK_T"], BLOCK_D=cfg["BLOCK_D"], NPAD=npad, NJ=nj,
        DOT_UPCAST=INTERPRET, INTERP=INTERPRET, num_warps=cfg["num_warps"], **xk)
    return ws, sq, s, hout


_COUNTERS: dict = {}


def token_counters(device: torch.device, t: int) -> torch.Tensor:
    """A zeroed int32 counter per token, kept per device and lane (kernels/common.py `lane`): kernels that take a
    ticket from it set it back to zero before they finish, so it is zero at every launch (no memset launch per
    call). Launches on one lane share it and must not run concurrently."""
    return zeroed_scratch(_COUNTERS, device, t, "mHC token counters")


def _mix(h, ws, sq, s, base, scale, iters, eps, norm_eps, npad, cfg, head=False, norm=None):
    """norm = (weight, rms_eps): x comes out RMS-normalized: with cfg SPLIT_NORM over a (T, D / BLOCK_MIX)
    grid whose last program per token normalizes, else one program per token walks all of D twice."""
    t, _, d = h.shape
    x = torch.empty((t, d), dtype=h.dtype, device=h.device)
    post = torch.empty((t, HC), dtype=torch.float32, device=h.device)
    comb = torch.empty((t, HC, HC), dtype=torch.float32, device=h.device)
    bs = min(triton.next_power_of_2(s), 32 * cfg["mix_warps"])   # <= 16 partial values per thread per chunk
    nw, rms_eps = norm if norm is not None else (base, 0.0)
    split = norm is not None and bool(cfg.get("SPLIT_NORM", False))
    nb = 1 if norm is not None and not split else triton.cdiv(d, cfg["BLOCK_MIX"])
    nsq = torch.empty((t, nb), dtype=torch.float32, device=h.device) if split else sq
    cnt = token_counters(h.device, t) if split else sq
    _mhc_mix[(t, nb + 1 if split else nb)](        # split: program nb of a row runs only Sinkhorn
        h, ws, sq, base, scale, x, post, comb, nw, nsq, cnt, t, d, s, eps, norm_eps, rms_eps,
        ITERS=iters, HEAD=head, NPAD=npad, BLOCK_S=bs, NCHUNK=triton.cdiv(s, bs), BLOCK_MIX=cfg["BLOCK_MIX"],
        NORM=norm is not None, SPLIT_NORM=split, NB_P2=triton.next_power_of_2(nb),
        BLOCK_FIN=min(triton.next_power_of_2(d), 1024 * cfg["mix_warps"]), INTERP=INTERPRET,
        num_warps=cfg["mix_warps"])
    return x, post, comb


def _check_iters(name, iters):
    if int(iters) < 1:
        raise ValueError(f"{name}: iters must be >= 1, got {iters}")


def _check_pre(name, h, fn, base, scale, iters, post_in=None, norm=None, head=False):
    """Validate an mHC pre-family call (post_in = (x, post, comb, x_add) of a fused post; norm = (weight, rms_eps))
    -> (T, D)."""
    check_device(h, fn, base, scale, *(v for v in post_in or () if v is not None), *(norm[:1] if norm else ()))
    t, d = _check_h(name, h)
    if post_in is not None:
        _check_post(name, t, d, *post_in)
    _check_proj(name, d, fn, base, scale, HC if head else (2 + HC) * HC, 1 if head else 3)
    if not head:
        _check_iters(name, iters)
    if norm is not None:
        check_dtype(f"{name}: weight", norm[0], torch.bfloat16)
        check_shape(f"{name}: weight", norm[0], (d,))
        if norm[1] < 0:
            raise ValueError(f"{name}: rms_eps must be >= 0, got {norm[1]}")
    return t, d


def _empty_outputs(h, fn, fused):
    d = h.shape[2]
    outs = (h.new_empty((0, d)), fn.new_empty((0, HC)), fn.new_empty((0, HC, HC)))
    return (torch.empty_like(h), *outs) if fused else outs


# impl "triton_v3": `_mhc_proj1` (+ `_mhc_tail` unless ONE) ------------------------------------------------------
ONE_LAUNCH_MAX_T = 1   # largest T whose tail runs in the projection's last program (one launch): not yet measured
SIMT_MAX_T = 4         # largest T projected with fp32 FMAs instead of bf16 MMAs: not yet measured


def mhc1_configs(params: dict) -> list[dict]:
    """(BLOCK_T tokens, BLOCK_D columns, warps) of `_mhc_proj1` (all four streams unrolled: only tiles that compile
    for sm_120 without spills in the fused-post form; (16, 64, 8) and (32, 32, 4) spilled; (16, 32, 4/8) take
    ~175 registers, (32, 32, 8) and (64, 32, 8) 255; SIMT: fp32 FMAs in a [BLOCK_T, NPAD, BLOCK_D] product for
    BLOCK_T <= 4, ~96 registers, no shared-memory layout changes), ONE (one launch: the token block's last projection
    program runs the tail) or a second launch `_mhc_tail` with tail_warps warps per token."""
    tiles = ((16, 32, 4, False), (16, 32, 8, False), (32, 32, 8, False), (64, 32, 8, False),
             (1, 32, 4, True), (2, 32, 4, True), (4, 32, 4, True))
    return [{"BLOCK_T": bt, "BLOCK_D": bd, "num_warps": w, "SIMT": simt, "ONE": one, "tail_warps": tw}
            for bt, bd, w, simt in tiles for one, tw in ((True, 4), (False, 4), (False, 8))]


def mhc1_default(params: dict) -> dict:
    t = params.get("T", 1)
    if t <= SIMT_MAX_T:   # fp32 FMA projection, BLOCK_T a power of two <= 4 (the MMA pads the tokens to 16)
        return {"BLOCK_T": min(triton.next_power_of_2(t), 4), "BLOCK_D": 32, "num_warps": 4, "SIMT": True,
                "ONE": t <= ONE_LAUNCH_MAX_T, "tail_warps": 8}
    if t <= 16:
        return {"BLOCK_T": 16, "BLOCK_D": 32, "num_warps": 4, "ONE": t <= ONE_LAUNCH_MAX_T, "tail_warps": 8}
    # H200, T=64 (first measurement): BLOCK_T 64 / 8 warps 21.38 us, BLOCK_T 32 / 8 warps (255 registers, two
    # waves of programs) 31.13 us
    return {"BLOCK_T": 64, "BLOCK_D": 32, "num_warps": 8, "ONE": False, "tail_warps": 8}


def _run1(op, h, fn, base, scale, rows, npad, iters, eps, norm_eps, config, fuse=None, norm=None, head=False):
    """Launch `_mhc_proj1` and, unless the config's ONE, `_mhc_tail`; returns (h' or None, x, post, comb)."""
    t, _, d = h.shape
    cfg = config or mhc1_default({"T": t, "D": d})
    bt, bd = cfg["BLOCK_T"], cfg["BLOCK_D"]
    s, nt, one = triton.cdiv(d, bd), triton.cdiv(t, bt), bool(cfg.get("ONE", False))
    h = h.contiguous()
    ws = torch.empty((t, s, npad), dtype=torch.float32, device=h.device)
    x = torch.empty((t, d), dtype=h.dtype, device=h.device)
    post = torch.empty((t, HC), dtype=torch.float32, device=h.device)
    comb = torch.empty((t, HC, HC), dtype=torch.float32, device=h.device)
    hout = h if fuse is None else torch.empty_like(h)
    args, xk = _post_args(fuse, h)
    nw, rms_eps = (norm[0].contiguous(), float(norm[1])) if norm is not None else (base, 0.0)
    tail_warps = cfg["num_warps"] if one else cfg.get("tail_warps", 8)
    # the tail's column block: <= 32 columns of each stream per thread (a config's BLOCK_FIN, e.g. in tests)
    fin = cfg.get("BLOCK_FIN") or min(triton.next_power_of_2(d), 1024 * tail_warps)
    common = dict(ROWS=rows, NPAD=npad, ITERS=int(iters), HEAD=head, NORM=norm is not None,
                  BLOCK_S=min(triton.next_power_of_2(s), 128), BLOCK_FIN=fin, ONE_PASS=fin >= d, INTERP=INTERPRET)
    fn, base, scale = fn.contiguous(), base.contiguous(), scale.contiguous()
    cnt = token_counters(h.device, nt) if one else ws
    _mhc_proj1[(nt, s)](h, *args, hout, fn, ws, cnt, base, scale, x, post, comb, nw,
                        t, d, s, eps, norm_eps, rms_eps, FUSE_POST=fuse is not None, ONE=one, BLOCK_T=bt,
                        BLOCK_D=bd, SIMT=bool(cfg.get("SIMT", False)), DOT_UPCAST=INTERPRET, num_warps=cfg["num_warps"],
                        **common, **xk)
    if not one:
        _mhc_tail[(t,)](hout, ws, base, scale, x, post, comb, nw, d, s, eps, norm_eps, rms_eps,
                        num_warps=tail_warps, **common)
    return (hout if fuse is not None else None), x, post, comb


_KERNELS1 = lambda: [_mhc_proj1, _mhc_tail]   # noqa: E731


@register_impl("mhc_pre", "triton_v3", backend="triton", configs=mhc1_configs, default_config=mhc1_default,
               kernels=_KERNELS1)
def mhc_pre_v3(h, fn, base, scale, iters: int, eps: float, norm_eps: float, config: dict | None = None):
    t, d = _check_pre("mhc_pre", h, fn, base, scale, iters)
    if t == 0:
        return _empty_outputs(h, fn, False)
    return _run1("mhc_pre", h, fn, base, scale, 24, 32, iters, eps, norm_eps, config)[1:]


@register_impl("mhc_post_pre", "triton_v3", backend="triton", configs=mhc1_configs, default_config=mhc1_default,
               kernels=_KERNELS1)
def mhc_post_pre_v3(x, h, post, comb, fn, base, scale, iters: int, eps: float, norm_eps: float, x_add=None,
                    config: dict | None = None):
    t, d = _check_pre("mhc_post_pre", h, fn, base, scale, iters, post_in=(x, post, comb, x_add))
    if t == 0:
        return _empty_outputs(h, fn, True)
    return _run1("mhc_post_pre", h, fn, base, scale, 24, 32, iters, eps, norm_eps, config, fuse=(x, post, comb, x_add))


@register_impl("mhc_post_pre_norm", "triton_v3", backend="triton", configs=mhc1_configs, default_config=mhc1_default,
               kernels=_KERNELS1)
def mhc_post_pre_norm_v3(x, h, post, comb, fn, base, scale, iters: int, eps: float, norm_eps: float, weight,
                         rms_eps: float, x_add=None, config: dict | None = None):
    t, d = _check_pre("mhc_post_pre_norm", h, fn, base, scale, iters, post_in=(x, post, comb, x_add),
                      norm=(weight, rms_eps))
    if t == 0:
        return _empty_outputs(h, fn, True)
    return _run1("mhc_post_pre_norm", h, fn, base, scale, 24, 32, iters, eps, norm_eps, config,
                 fuse=(x, post, comb, x_add), norm=(weight, rms_eps))


@register_impl("mhc_head", "triton_v3", backend="triton", configs=mhc1_configs, default_config=mhc1_default,
               kernels=_KERNELS1)
def mhc_head_v3(h, fn, base, scale, eps: float, norm_eps: float, config: dict | None = None):
    t, d = _check_pre("mhc_head", h, fn, base, scale, 1, head=True)
    if t == 0:
        return h.new_empty((0, d))
    return _run1("mhc_head", h, fn, base, scale, HC, 16, 1, eps, norm_eps, config, head=True)[1]


# impl "triton" (mhc_head: "triton_v4") wrappers -------------------------------------------------------------------
def mhc4_configs(params: dict, mix_space=None) -> list[dict]:
    """(BLOCK_T tokens, BLOCK_D columns, warps, SIMT; MMA: RELOAD, its operands read back from the stored h') of
    `_mhc_proj4` (all four streams and their fn tiles loaded at once), (BLOCK_MIX columns, mix_warps) of an x program
    of `_mhc_fin4` and, with the fused norm (one x program per token holds the row), its norm_warps: PAIR "proj4".
    `mix_space` (mhc_pre / mhc_post_pre / mhc_post_pre_norm): the previous pair's space too (`_mhc_proj` + `_mhc_mix`,
    impl triton_v2's configs), as PAIR "mix", so that a tune compares both pairs and the default is in the space."""
    tiles = ((1, 16, 2, True), (1, 32, 4, True), (2, 32, 4, True), (4, 32, 4, True), (8, 16, 4, True),
             (8, 32, 8, True), (16, 16, 4, True), (16, 32, 4, False), (16, 32, 8, False))   # MMA, 32+ tokens: spills
    mixes = ((256, 2, 4), (512, 4, 8), (1024, 4, 16), (2048, 8, 8))
    own = [{"PAIR": "proj4", "BLOCK_T": bt, "BLOCK_D": bd, "num_warps": w, "SIMT": simt, "RELOAD": not simt,
            "BLOCK_MIX": mx, "mix_warps": mw, "norm_warps": nw} for bt, bd, w, simt in tiles for mx, mw, nw in mixes]
    return own + ([{**c, "PAIR": "mix"} for c in mix_space(params)] if mix_space else [])


# T in (4, 16]: impl "triton"'s default is the previous pair (PAIR "mix": `_mhc_proj` + `_mhc_mix`, impl triton_v2's
# kernels and default), measured faster there (below, `mhc4_default`)
PAIR_MIX_T = (4, 16)


def mhc4_default(params: dict, mix_default=None) -> dict:
    """PAIR "proj4" (`_mhc_proj4` + `_mhc_fin4`) and its tiles; with `mix_default` (the op's triton_v2 default:
    mhc_default, or mhc_norm_default with the fused norm), at PAIR_MIX_T[0] < T <= PAIR_MIX_T[1] that config as
    PAIR "mix" (H200, mid-session call, graph replay: mhc_post_pre_norm at T=16 triton_v2 11.31 us, proj4 11.99; at
    T=1 10.72 vs 8.33 and T=64 20.40 vs 13.54). The default is a config like any other: an explicit default runs
    what no config runs, so tune's first trial and sm_120's inspection are of the kernels the step runs."""
    t, d = params.get("T", 1), params.get("D", 4096)
    if mix_default is not None and PAIR_MIX_T[0] < t <= PAIR_MIX_T[1]:
        return {**mix_default(params), "PAIR": "mix"}
    # the norm's row program: <= 16 columns per thread (4 streams of fp32 h' each); at T <= 4 <= 32 (H200, T=1,
    # D=4096: 4 warps 8.33 us, 8 warps 9.21, 16 warps 11.74; at T=64 8 warps 13.54, 16 warps 16.10)
    width = triton.next_power_of_2(d)
    mix = {"BLOCK_MIX": 512, "mix_warps": 4, "norm_warps": min(16, max(1, width // 512))}
    if t <= 4:    # fp32 FMA projection, BLOCK_T a power of two <= 4
        return {"PAIR": "proj4", "BLOCK_T": min(triton.next_power_of_2(t), 4), "BLOCK_D": 32, "num_warps": 4,
                "SIMT": True, **mix, "norm_warps": min(16, max(1, width // 1024))}
    # MMA; with a fused post its operands are read back from the stored h' (RELOAD): formed in registers, the post
    # took the dot operands' replicated layout (sm_90: 244 registers, 61 barriers against 72 and 19; H200 mid-session
    # call, T=64: mhc_post_pre 23.3 us against mhc_pre's 12.4)
    return {"PAIR": "proj4", "BLOCK_T": 16, "BLOCK_D": 32, "num_warps": 4, "SIMT": False, "RELOAD": True, **mix}


def _config4(op: str, t: int, d: int, config: dict | None, mix_default) -> tuple[str, dict]:
    """Impl "triton"'s config: `config`, else the lookup's (tuned entry or pin over `mhc4_default`) -> (PAIR, the
    config without PAIR). A tuned entry or pin that names no PAIR keeps the default's: at 4 < T <= 16 that is the
    previous pair, so a proj4 config there must say PAIR "proj4" (mhc4_configs' entries do)."""
    cfg = config or lookup(op, {"T": t, "D": d}, mhc4_default({"T": t, "D": d}, mix_default))
    pair = cfg.get("PAIR", "proj4")
    if pair not in ("proj4", "mix"):
        raise ValueError(f"{op}: config PAIR={pair!r}: 'proj4' (_mhc_proj4 + _mhc_fin4) or 'mix' (_mhc_proj + "
                         f"_mhc_mix)")
    return pair, {k: v for k, v in cfg.items() if k != "PAIR"}


def _run4(op, h, fn, base, scale, rows, npad, iters, eps, norm_eps, config, fuse=None, norm=None, head=False):
    """Launch `_mhc_proj4` and `_mhc_fin4`; returns (h' or None, x, post, comb)."""
    t, _, d = h.shape
    cfg = config or lookup(op, {"T": t, "D": d}, mhc4_default({"T": t, "D": d}))
    if cfg.get("PAIR", "proj4") != "proj4":
        raise ValueError(f"{op}: config PAIR={cfg['PAIR']!r}: this implementation runs 'proj4' only")
    bt, bd = cfg["BLOCK_T"], cfg["BLOCK_D"]
    s = triton.cdiv(d, bd)
    h = h.contiguous()
    ws = torch.empty((t, s, npad), dtype=torch.float32, device=h.device)
    x = torch.empty((t, d), dtype=h.dtype, device=h.device)
    post = torch.empty((t, HC), dtype=torch.float32, device=h.device)
    comb = torch.empty((t, HC, HC), dtype=torch.float32, device=h.device)
    hout = h if fuse is None else torch.empty_like(h)
    args, xk = _post_args(fuse, h)
    nw, rms_eps = (norm[0].contiguous(), float(norm[1])) if norm is not None else (base, 0.0)
    fn, base, scale = fn.contiguous(), base.contiguous(), scale.contiguous()
    _mhc_proj4[(triton.cdiv(t, bt), s)](h, *args, hout, fn, ws, t, d, s, ROWS=rows, NPAD=npad,
                                        FUSE_POST=fuse is not None, BLOCK_T=bt, BLOCK_D=bd, SIMT=bool(cfg["SIMT"]),
                                        RELOAD=bool(cfg.get("RELOAD", False)), DOT_UPCAST=INTERPRET, INTERP=INTERPRET,
                                        num_warps=cfg["num_warps"], **xk, **pdl_args(h.device, t))
    # the norm needs the whole row's sum of squares: one x program per token holds the row (norm_warps warps)
    mix = triton.next_power_of_2(d) if norm is not None else cfg["BLOCK_MIX"]
    nb = triton.cdiv(d, mix)
    _mhc_fin4[(t, nb if head else nb + 1)](
        hout, ws, base, scale, x, post, comb, nw, d, s, eps, norm_eps, rms_eps, ROWS=rows, NPAD=npad,
        ITERS=int(iters), HEAD=head, NORM=norm is not None,
        BLOCK_S=cfg.get("BLOCK_S") or min(triton.next_power_of_2(s), 128),   # partials summed BLOCK_S at a time
        BLOCK_MIX=mix, INTERP=INTERPRET, num_warps=cfg["norm_warps"] if norm is not None else cfg["mix_warps"],
        **pdl_args(h.device, t))
    return (hout if fuse is not None else None), x, post, comb


_KERNELS4 = lambda: [_mhc_proj4, _mhc_fin4]   # noqa: E731
_KERNELS42 = lambda: _KERNELS4() + _KERNELS2()   # noqa: E731 - impl "triton" runs either pair (config PAIR)
_MIX_NORM_SPACE = lambda p: mhc_configs(p, split_norm=True)   # noqa: E731


@register_impl("mhc_pre", "triton", backend="triton", configs=lambda p: mhc4_configs(p, mhc_configs),
               default_config=lambda p: mhc4_default(p, mhc_default), kernels=_KERNELS42)
def mhc_pre_v4(h, fn, base, scale, iters: int, eps: float, norm_eps: float, config: dict | None = None):
    t, d = _check_pre("mhc_pre", h, fn, base, scale, iters)
    if t == 0:
        return _empty_outputs(h, fn, False)
    pair, cfg = _config4("mhc_pre", t, d, config, mhc_default)
    if pair == "mix":
        return mhc_pre(h, fn, base, scale, iters, eps, norm_eps, config=cfg)
    return _run4("mhc_pre", h, fn, base, scale, 24, 32, iters, eps, norm_eps, cfg)[1:]


@register_impl("mhc_post_pre", "triton", backend="triton", configs=lambda p: mhc4_configs(p, mhc_configs),
               default_config=lambda p: mhc4_default(p, mhc_default), kernels=_KERNELS42)
def mhc_post_pre_v4(x, h, post, comb, fn, base, scale, iters: int, eps: float, norm_eps: float, x_add=None,
                    config: dict | None = None):
    t, d = _check_pre("mhc_post_pre", h, fn, base, scale, iters, post_in=(x, post, comb, x_add))
    if t == 0:
        return _empty_outputs(h, fn, True)
    pair, cfg = _config4("mhc_post_pre", t, d, config, mhc_default)
    if pair == "mix":
        return mhc_post_pre(x, h, post, comb, fn, base, scale, iters, eps, norm_eps, x_add, config=cfg)
    return _run4("mhc_post_pre", h, fn, base, scale, 24, 32, iters, eps, norm_eps, cfg, fuse=(x, post, comb, x_add))


@register_impl("mhc_post_pre_norm", "triton", backend="triton",
               configs=lambda p: mhc4_configs(p, _MIX_NORM_SPACE),
               default_config=lambda p: mhc4_default(p, mhc_norm_default), kernels=_KERNELS42)
def mhc_post_pre_norm_v4(x, h, post, comb, fn, base, scale, iters: int, eps: float, norm_eps: float, weight,
                         rms_eps: float, x_add=None, config: dict | None = None):
    t, d = _check_pre("mhc_post_pre_norm", h, fn, base, scale, iters, post_in=(x, post, comb, x_add),
                      norm=(weight, rms_eps))
    if t == 0:
        return _empty_outputs(h, fn, True)
    pair, cfg = _config4("mhc_post_pre_norm", t, d, config, mhc_norm_default)
    if pair == "mix":
        return mhc_post_pre_norm(x, h, post, comb, fn, base, scale, iters, eps, norm_eps, weight, rms_eps, x_add,
                                 config=cfg)
    return _run4("mhc_post_pre_norm", h, fn, base, scale, 24, 32, iters, eps, norm_eps, cfg,
                 fuse=(x, post, comb, x_add), norm=(weight, rms_eps))


@register_impl("mhc_head", "triton_v4", backend="triton", configs=mhc4_configs, default_config=mhc4_default,
               kernels=_KERNELS4)
def mhc_head_v4(h, fn, base, scale, eps: float, norm_eps: float, config: dict | None = None):
    t, d = _check_pre("mhc_head", h, fn, base, scale, 1, head=True)
    if t == 0:
        return h.new_empty((0, d))
    return _run4("mhc_head", h, fn, base, scale, HC, 16, 1, eps, norm_eps, config, head=True)[1]


@register_impl("mhc_post", "triton", backend="triton", configs=mhc_post_configs, default_config=mhc_post_default,
               kernels=lambda: [_mhc_post])
def mhc_post(x, h, post, comb, x_add=None, config: dict | None = None):
    check_device(x, h, post, comb, *(() if x_add is None else (x_add,)))
    t, d = _check_h("mhc_post", h)
    _check_post("mhc_post", t, d, x, post, comb, x_add)
    out = torch.empty((t, HC, d), dtype=h.dtype, device=h.device)
    key = {"T": t, "D": d}
    cfg = config or lookup("mhc_post", key, mhc_post_default(key))
    if t:
        (xin, xa, pin, cin), xk = _post_args((x, post, comb, x_add), h)
        _mhc_post[(t, triton.cdiv(d, cfg["BLOCK_D"]))](
            xin, xa, h.contiguous(), pin, cin, out, d, BLOCK_D=cfg["BLOCK_D"], INTERP=INTERPRET,
            num_warps=cfg["num_warps"], **xk)
    return out


# impl "triton_v2" (mhc_head: "triton"): `_mhc_proj` + `_mhc_mix`, the partials summed by every mix program (faster
# than triton_v3 on the H200 at T = 1, 16 and 64; impl "triton" runs it at 4 < T <= 16: docs/perf/mhc_norm.md) ----
def _v2_cfg(op, t, d, config, default=mhc_default):
    key = {"T": t, "D": d}
    return config or lookup(op, key, default(key))


_KERNELS2 = lambda: [_mhc_proj, _mhc_mix]   # noqa: E731


@register_impl("mhc_pre", "triton_v2", backend="triton", configs=mhc_configs, default_config=mhc_default,
               kernels=_KERNELS2)
def mhc_pre(h, fn, base, scale, iters: int, eps: float, norm_eps: float, config: dict | None = None):
    t, d = _check_pre("mhc_pre", h, fn, base, scale, iters)
    if t == 0:
        return _empty_outputs(h, fn, False)
    cfg = _v2_cfg("mhc_pre", t, d, config)
    h = h.contiguous()
    ws, sq, s, _ = _project(h, fn.contiguous(), 24, 32, cfg)
    return _mix(h, ws, sq, s, base.contiguous(), scale.contiguous(), int(iters), eps, norm_eps, 32, cfg)


@register_impl("mhc_post_pre", "triton_v2", backend="triton", configs=mhc_configs, default_config=mhc_default,
               kernels=_KERNELS2)
def mhc_post_pre(x, h, post, comb, fn, base, scale, iters: int, eps: float, norm_eps: float, x_add=None,
                 config: dict | None = None):
    t, d = _check_pre("mhc_post_pre", h, fn, base, scale, iters, post_in=(x, post, comb, x_add))
    if t == 0:
        return _empty_outputs(h, fn, True)
    cfg = _v2_cfg("mhc_post_pre", t, d, config)
    h = h.contiguous()
    ws, sq, s, h2 = _project(h, fn.contiguous(), 24, 32, cfg,
                             fuse=(x, post, comb, x_add))
    return (h2, *_mix(h2, ws, sq, s, base.contiguous(), scale.contiguous(), int(iters), eps, norm_eps, 32, cfg))


@register_impl("mhc_post_pre_norm", "triton_v2", backend="triton", configs=lambda p: mhc_configs(p, split_norm=True),
               default_config=lambda p: mhc_norm_default(p), kernels=_KERNELS2)
def mhc_post_pre_norm(x, h, post, comb, fn, base, scale, iters: int, eps: float, norm_eps: float, weight,
                      rms_eps: float, x_add=None, config: dict | None = None):
    t, d = _check_pre("mhc_post_pre_norm", h, fn, base, scale, iters, post_in=(x, post, comb, x_add),
                      norm=(weight, rms_eps))
    if t == 0:
        return _empty_outputs(h, fn, True)
    cfg = _v2_cfg("mhc_post_pre_norm", t, d, config, mhc_norm_default)
    h = h.contiguous()
    ws, sq, s, h2 = _project(h, fn.contiguous(), 24, 32, cfg,
                             fuse=(x, post, comb, x_add))
    return (h2, *_mix(h2, ws, sq, s, base.contiguous(), scale.contiguous(), int(iters), eps, norm_eps, 32, cfg,
                      norm=(weight.contiguous(), float(rms_eps))))


@register_impl("mhc_post_pre_norm", "triton_v1", backend="triton", configs=mhc_configs,
               default_config=mhc_default, kernels=_KERNELS2)
def mhc_post_pre_norm_v1(x, h, post, comb, fn, base, scale, iters: int, eps: float, norm_eps: float, weight,
                         rms_eps: float, x_add=None, config: dict | None = None):
    """The first version (kept to measure against): the mix's norm is one program per token walking D twice."""
    cfg = {**_v2_cfg("mhc_post_pre_norm", h.shape[0], h.shape[-1], config), "SPLIT_NORM": False}
    return mhc_post_pre_norm(x, h, post, comb, fn, base, scale, iters, eps, norm_eps, weight, rms_eps, x_add,
                             config=cfg)


@register_impl("mhc_head", "triton", backend="triton", configs=mhc_configs, default_config=mhc_default,
               kernels=_KERNELS2)
def mhc_head(h, fn, base, scale, eps: float, norm_eps: float, config: dict | None = None):
    t, d = _check_pre("mhc_head", h, fn, base, scale, 1, head=True)
    if t == 0:
        return h.new_empty((0, d))
    cfg = _v2_cfg("mhc_head", t, d, config)
    h = h.contiguous()
    ws, sq, s, _ = _project(h, fn.contiguous(), HC, 16, cfg)
    return _mix(h, ws, sq, s, base.contiguous(), scale.contiguous(), 1, eps, norm_eps, 16, cfg, head=True)[0]
