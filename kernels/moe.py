"""Triton MoE layer: gate (sqrtsoftplus + top-k / hash), routed MXFP4 experts, FP8 shared expert.

Letters: T tokens, D hidden, E routed experts, El local experts, F moe_inter_dim, K top-k,
TK = T * K routing slots (slot = t * K + k), BM tokens x BN features per tile.

Routed experts, no host synchronisation (CUDA-graph capturable):
  1. group slots by local expert on the device: key = expert - offset (El for non-local slots), a
     scatter-add histogram, its cumsum (expert start offsets) and a stable argsort (torch ops);
  2. `_moe_up_kernel`, grid (El, F / BN): one program per (expert, F tile) takes that expert's tokens as
     the M dimension (empty experts exit at once), streams W1 and W3 once per BM tokens, decodes e2m1
     in registers to bf16 bit patterns with the UE8M0 scale in the exponent (integer ops), tensor-core
     dots, then bf16 rounding, clamp, SwiGLU and the routing weight; writes a (TK, F) bf16 by sorted position;
  3. fp8-simulate a, then `_moe_down_kernel`, grid (El, D / BN): W2 on a,
     bf16-rounded per expert output into a per-slot fp32 buffer (TK, D);
  4. `_combine_kernel`: y[t] = sum over the token's local slots in k order (+ the shared expert):
     a deterministic reduction, no atomics.
"""
from __future__ import annotations

import contextlib

import torch
import triton
import triton.language as tl

from kernelbench.kernels.common import (INTERPRET, Beside, bulk_rows_ok, check_device, check_dtype, check_shape,
                                       dot_operand, fp8_dot, fp8_promote, l2_prefetch_rows, pdl_args, pdl_enter,
                                       pdl_release, sm90_compiled, to_bf16)
from kernelbench.kernels.attention import sm_count
from kernelbench.kernels.trace import trace_args, trace_kind, trace_mark, trace_step, trace_step_after
from kernelbench.kernels.linear import (_bf16_gemm, _default, _fit_split, fp4_tile_dot, fp4_tile_dot_fp8, fp8_linear,
                                       split_tickets)
from kernelbench.kernels.quant import _launch_fp8, e4m3_round_code, fp4_hi_e4m3, fp4_lo_e4m3, pow2, ue8m0_exp
from kernelbench.registry import register_impl
from kernelbench.tuned_configs import lookup


# ---- gate -------------------------------------------------------------------------------------------------
@triton.jit
def _topk_kernel(logit_ptr, bias_ptr, tid_ptr, ids_ptr, w_ptr, i_ptr, E, route_scale,
                 K: tl.constexpr, KP: tl.constexpr, EP: tl.constexpr, HAS_BIAS: tl.constexpr, HASH: tl.constexpr):
    # logits (T, E) fp32; bias (E,) fp32; tid2eid (V, K) int32; token_ids (T,) int64 -> w (T, K) fp32, i (T, K) int64
    _topk_row(tl.program_id(0), logit_ptr, bias_ptr, tid_ptr, ids_ptr, w_ptr, i_ptr, E, route_scale, K, KP, EP,
              HAS_BIAS, HASH)


@triton.jit
def _topk_row(t, logit_ptr, bias_ptr, tid_ptr, ids_ptr, w_ptr, i_ptr, E, route_scale,
              K: tl.constexpr, KP: tl.constexpr, EP: tl.constexpr, HAS_BIAS: tl.constexpr, HASH: tl.constexpr):
    """Token t's top-K (the body of _topk_kernel, shared with _gate_route_kernel): _topk_rows for one row."""
    _topk_rows(t, t + 1, logit_ptr, bias_ptr, tid_ptr, ids_ptr, w_ptr, i_ptr, E, route_scale, K, KP, EP, HAS_BIAS,
               HASH, 1, False)


@triton.jit
def _topk_rows(t0, T, logit_ptr, bias_ptr, tid_ptr, ids_ptr, w_ptr, i_ptr, E, route_scale,
               K: tl.constexpr, KP: tl.constexpr, EP: tl.constexpr, HAS_BIAS: tl.constexpr, HASH: tl.constexpr,
               TP: tl.constexpr, CG: tl.constexpr):
    """Tokens t0 .. t0 + TP - 1 (those < T), all at once: each one's top-K experts (sqrtsoftplus scores + bias, ties
    to the lower index; or the hash table) and their weights normalised in the log domain. Every step is a per-row
    reduction, so TP rows cost about what one does. CG: the logits were written by other programs of this launch."""
    if HASH:
        t, tm, e, b, ls = _row_scores(t0, T, logit_ptr, bias_ptr, E, EP, HAS_BIAS, TP, CG)
        kk = tl.arange(0, KP)[None, :]
        ee = e[None, :]
        wv = tl.full((TP, KP), float("-inf"), dtype=tl.float32)
        iv = tl.zeros((TP, KP), dtype=tl.int32)
        tok = tl.load(ids_ptr + t, mask=tm, other=0)
        for k in tl.static_range(K):
            idx = tl.load(tid_ptr + tok * K + k, mask=tm, other=0)[:, None]
            wk = tl.sum(tl.where(ee == idx, ls, 0.0), axis=1)[:, None]
            wv = tl.where(kk == k, wk, wv)
            iv = tl.where(kk == k, idx, iv)
        _store_topk(wv, iv, t, tm, w_ptr, i_ptr, route_scale, K, KP)
    else:
        _score_topk(t0, T, logit_ptr, bias_ptr, w_ptr, i_ptr, E, route_scale, K, EP, HAS_BIAS, TP, CG)


@triton.jit
def _score_topk(t0, T, logit_ptr, bias_ptr, w_ptr, i_ptr, E, route_scale, K: tl.constexpr, EP: tl.constexpr,
                HAS_BIAS: tl.constexpr, TP: tl.constexpr, CG: tl.constexpr, TRACE: tl.constexpr = False,
                trace_ptr=0):
    """_topk_rows with score routing: the rows' scores (_row_scores), each one's top-K places (_topk_slots), the
    weights and ids stored to them (_store_topk_slots) -> (rows, rm, ids, slot) for a slot sort from registers.
    TRACE: sub-steps 1 (scores formed) and 2 (places found) of the program (the one-launch gate's last)."""
    rows, rm, ids, sc, ls = _row_scores(t0, T, logit_ptr, bias_ptr, E, EP, HAS_BIAS, TP, CG)
    trace_step_after(trace_ptr, 1, sc, TRACE)
    slot = _topk_slots(sc, ids[None, :], K)
    trace_step_after(trace_ptr, 2, slot, TRACE)
    _store_topk_slots(ls, ids[None, :], slot, rows, rm, w_ptr, i_ptr, route_scale, K)
    return rows, rm, ids, slot


@triton.jit
def _row_scores(t0, T, logit_ptr, bias_ptr, E, EP: tl.constexpr, HAS_BIAS: tl.constexpr, TP: tl.constexpr,
                CG: tl.constexpr):
    """Rows t0 .. t0 + TP - 1 of the logits (T, E): -> t, tm (t < T), e (EP,), the selection scores b and the log
    scores ls (TP, EP) (_gate_scores). CG: the logits were written by other programs of this launch."""
    t = t0 + tl.arange(0, TP)
    tm = t < T
    e = tl.arange(0, EP)
    em = e < E
    lp = logit_ptr + t[:, None] * E + e[None, :]
    if CG:
        lg = tl.load(lp, mask=tm[:, None] & em[None, :], other=0.0, cache_modifier=".cg")
    else:
        lg = tl.load(lp, mask=tm[:, None] & em[None, :], other=0.0)
    b, ls = _gate_scores(lg, e, em, bias_ptr, HAS_BIAS)
    return t, tm, e, b, ls


@triton.jit
def _gate_scores(lg, e, em, bias_ptr, HAS_BIAS: tl.constexpr):
    """Logits lg (R, C) of experts e (C,) (em: e < E) -> (b, ls): the selection scores sqrtsoftplus + bias (-inf past
    E) and the log scores log(sqrtsoftplus), elementwise."""
    # softplus = log1p(exp(l)) (torch: l for l > 20); log1p(y) = log(1 + y) * y / ((1 + y) - 1) keeps the
    # tiny scores of very negative logits (a plain log(1 + y) rounds them to 0 and can select 0-weight experts)
    y = tl.exp(tl.minimum(lg, 20.0))
    u = 1.0 + y
    l1p = tl.where(u == 1.0, y, tl.log(u) * (y / (u - 1.0)))
    s = tl.sqrt(tl.where(lg > 20.0, lg, l1p))
    # log(s), finite for every finite logit: the weights are normalised in the log domain (see
    # reference.moe.log_gate_scores), so a token whose selected scores all underflow gets no 0/0
    ls = 0.5 * tl.where(lg > 20.0, tl.log(tl.maximum(lg, 20.0)), tl.where(lg < -15.0, lg, tl.log(l1p)))
    b = s
    if HAS_BIAS:
        b = s + tl.load(bias_ptr + e, mask=em, other=0.0)[None, :]
    b = tl.where(em[None, :], b, float("-inf"))
    return b, ls


@triton.jit
def _order_key(b, ids):
    """(score b, expert id) -> one int64 that orders like the official rule: larger for a larger b and, at equal b,
    for the lower id (ids >= 0, below 2^31). b's fp32 bits made monotone (negatives: magnitude bits flipped; -0.0
    taken as +0.0) in the high word, 2^31 - 1 - id in the low word: a row's best is ONE max-reduction."""
    bits = (b + 0.0).to(tl.int32, bitcast=True)                         # + 0.0: -0.0 -> +0.0 (equal scores)
    mono = bits ^ ((bits >> 31) & 0x7FFFFFFF)
    return (mono.to(tl.int64) << 32) | (0x7FFFFFFF - ids).to(tl.int64)


@triton.jit
def _topk_slots(b, ids, K: tl.constexpr):
    """Per row of b (R, C): each element's place among the row's K largest (ties to the lower id; ids (R or 1, C)
    distinct within a row), K for every other element. K max-reductions of the packed key (_order_key) and nothing
    else: the caller scatters what it needs to the places, instead of three reductions a place (max, lowest id,
    gather). The one-launch gate's last program at T = 1: 46 block barriers instead of 72 (sm_90); on the H200 no
    measurable change in time (session 20 call 3): the barriers were not what set it."""
    key = _order_key(b, ids)
    slot = tl.full(key.shape, K, dtype=tl.int32)
    for k in tl.static_range(K):
        hit = (key == tl.max(key, axis=1)[:, None]) & (slot == K)
        slot = tl.where(hit, k, slot)
        key = tl.where(hit, -0x7FFFFFFFFFFFFFFF - 1, key)
    return slot


@triton.jit
def _log_normalise(lw, valid, route_scale):
    """Log weights lw (R, C) -> the weights of the valid ones normalised in the log domain (exp(lw - max) / sum)
    x route_scale, 0 elsewhere."""
    ex = tl.where(valid, tl.exp(lw - tl.max(tl.where(valid, lw, float("-inf")), axis=1)[:, None]), 0.0)
    return tl.math.div_rn(ex, tl.sum(ex, axis=1)[:, None]) * route_scale


@triton.jit
def _store_topk(wv, iv, t, tm, w_ptr, i_ptr, route_scale, K: tl.constexpr, KP: tl.constexpr):
    """The log scores wv (R, KP) of ids iv in places 0..K-1 -> weights normalised in the log domain x route_scale,
    stored with their ids into w, idx (T, K) at rows t (tm: t < T)."""
    kk = tl.arange(0, KP)[None, :]
    om = tm[:, None] & (kk < K)
    tl.store(w_ptr + t[:, None] * K + kk, _log_normalise(wv, kk < K, route_scale), mask=om)
    tl.store(i_ptr + t[:, None] * K + kk, iv.to(tl.int64), mask=om)


@triton.jit
def _store_topk_slots(ls, ids, slot, t, tm, w_ptr, i_ptr, route_scale, K: tl.constexpr):
    """_store_topk for a selection given as places (_topk_slots): each selected element writes its own weight and
    id to its place."""
    sel = slot < K
    om = tm[:, None] & sel
    out = t[:, None] * K + slot
    tl.store(w_ptr + out, _log_normalise(ls, sel, route_scale), mask=om)
    tl.store(i_ptr + out, tl.broadcast_to(ids, slot.shape).to(tl.int64), mask=om)


@triton.jit
def _hash_rows_topk(T, logit_ptr, tid_ptr, ids_ptr, w_ptr, i_ptr, route_scale, K: tl.constexpr, KP: tl.constexpr,
                    TP: tl.constexpr):
    """_topk_rows' hash branch for logits stored (T, K) in table order (ROWS_ROUTED: only the routed experts were
    scored): tokens 0 .. TP - 1 (those < T), written by other programs of this launch."""
    t = tl.arange(0, TP)
    tm = t < T
    kk = tl.arange(0, KP)
    m = tm[:, None] & (kk < K)[None, :]
    lg = tl.load(logit_ptr + t[:, None] * K + kk[None, :], mask=m, other=0.0, cache_modifier=".cg")
    tok = tl.load(ids_ptr + t, mask=tm, other=0)
    iv = tl.load(tid_ptr + tok[:, None] * K + kk[None, :], mask=m, other=0)
    _, ls = _gate_scores(lg, kk, kk < K, logit_ptr, False)
    _store_topk(ls, iv, t, tm, w_ptr, i_ptr, route_scale, K, KP)


# ---- routed experts ------------------------------------------------------------------------------------------
@triton.jit
def _moe_up_kernel(x_ptr, sx_ptr, rw_ptr, sorted_ptr, start_ptr, w1_ptr, s1_ptr, w3_ptr, s3_ptr, a_ptr, limit,
                   D: tl.constexpr, F: tl.constexpr, K: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr,
                   FP8_DOT: tl.constexpr, DOT_UPCAST: tl.constexpr, RNE_FIX: tl.constexpr, ASM: tl.constexpr = False):
    # x (T, D) bf16 fp8-simulated (group 128), or with FP8_DOT its e4m3 codes and sx (T, D/128) fp32 scales;
    # rw (TK,) fp32 routing weights; sorted (TK,) int32 slots grouped by expert; start (El+1,)
    # w1, w3 (El, F, D/2) uint8; s1, s3 (El, F, D/32) uint8 e8m0; a (TK, F) bf16 by sorted position
    e = tl.program_id(0)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    start = tl.load(start_ptr + e)
    end = tl.load(start_ptr + e + 1)
    e64 = e.to(tl.int64)
    w1 = w1_ptr + e64 * (F * (D // 2))
    w3 = w3_ptr + e64 * (F * (D // 2))
    s1 = s1_ptr + e64 * (F * (D // 32))
    s3 = s3_ptr + e64 * (F * (D // 32))
    c = start
    while c < end:
        pos = c + tl.arange(0, BM)
        pm = pos < end
        slot = tl.load(sorted_ptr + pos, mask=pm, other=0)
        tok = slot // K
        accg = tl.zeros((BN, BM), dtype=tl.float32)
        accu = tl.zeros((BN, BM), dtype=tl.float32)
        for kb in range(D // 128):
            if FP8_DOT:
                accg = fp4_tile_dot_fp8(accg, w1, s1, rn, D // 2, D // 32, kb, x_ptr, sx_ptr, tok, pm, D, ASM)
                accu = fp4_tile_dot_fp8(accu, w3, s3, rn, D // 2, D // 32, kb, x_ptr, sx_ptr, tok, pm, D, ASM)
            else:
                accg = fp4_tile_dot(accg, w1, s1, rn, D // 2, D // 32, kb, x_ptr, tok, pm, D, DOT_UPCAST)
                accu = fp4_tile_dot(accu, w3, s3, rn, D // 2, D // 32, kb, x_ptr, tok, pm, D, DOT_UPCAST)
        g = to_bf16(accg, RNE_FIX).to(tl.float32)          # the expert GEMMs return bf16
        u = to_bf16(accu, RNE_FIX).to(tl.float32)
        u = tl.minimum(tl.maximum(u, -limit), limit)
        g = tl.minimum(g, limit)
        rw = tl.load(rw_ptr + slot, mask=pm, other=0.0)
        a = g / (1.0 + tl.exp(-g)) * u * rw[None, :]
        tl.store(a_ptr + pos[None, :].to(tl.int64) * F + rn[:, None], to_bf16(a, RNE_FIX), mask=pm[None, :])
        c += BM


@triton.jit
def _moe_down_kernel(a_ptr, sa_ptr, sorted_ptr, start_ptr, w2_ptr, s2_ptr, ybuf_ptr,
                     D: tl.constexpr, F: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr,
                     FP8_DOT: tl.constexpr, DOT_UPCAST: tl.constexpr, RNE_FIX: tl.constexpr, ASM: tl.constexpr = False):
    # a (TK, F) bf16 fp8-simulated by sorted position, or with FP8_DOT its e4m3 codes and sa (TK, F/128) fp32;
    # w2 (El, D, F/2) uint8; s2 (El, D, F/32) uint8; ybuf (TK, D) fp32 by slot
    e = tl.program_id(0)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    start = tl.load(start_ptr + e)
    end = tl.load(start_ptr + e + 1)
    e64 = e.to(tl.int64)
    w2 = w2_ptr + e64 * (D * (F // 2))
    s2 = s2_ptr + e64 * (D * (F // 32))
    c = start
    while c < end:
        pos = c + tl.arange(0, BM)
        pm = pos < end
        slot = tl.load(sorted_ptr + pos, mask=pm, other=0)
        acc = tl.zeros((BN, BM), dtype=tl.float32)
        for kb in range(F // 128):
            if FP8_DOT:
                acc = fp4_tile_dot_fp8(acc, w2, s2, rn, F // 2, F // 32, kb, a_ptr, sa_ptr, pos, pm, F, ASM)
            else:
                acc = fp4_tile_dot(acc, w2, s2, rn, F // 2, F // 32, kb, a_ptr, pos, pm, F, DOT_UPCAST)
        y = to_bf16(acc, RNE_FIX).to(tl.float32)            # each expert's output is bf16
        tl.store(ybuf_ptr + slot[None, :].to(tl.int64) * D + rn[:, None], y, mask=pm[None, :])
        c += BM


@triton.jit
def _combine_kernel(ybuf_ptr, idx_ptr, shared_ptr, out_ptr, D, offset, El,
                    K: tl.constexpr, BLOCK: tl.constexpr, HAS_SHARED: tl.constexpr, OUT_BF16: tl.constexpr,
                    RNE_FIX: tl.constexpr):
    # ybuf (TK, D) fp32; idx (T, K) int64; shared (T, D) bf16 -> out (T, D) fp32 or bf16
    t = tl.program_id(0)
    d = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    dm = d < D
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for k in tl.static_range(K):
        le = tl.load(idx_ptr + t * K + k) - offset
        local = (le >= 0) & (le < El)
        acc += tl.load(ybuf_ptr + (t * K + k).to(tl.int64) * D + d, mask=dm & local, other=0.0)
    if HAS_SHARED:
        acc += tl.load(shared_ptr + t * D + d, mask=dm, other=0.0).to(tl.float32)
    if OUT_BF16:
        tl.store(out_ptr + t * D + d, to_bf16(acc, RNE_FIX), mask=dm)
    else:
        tl.store(out_ptr + t * D + d, acc, mask=dm)


@triton.jit
def _swiglu_kernel(g_ptr, u_ptr, out_ptr, NUMEL, limit, BLOCK: tl.constexpr, RNE_FIX: tl.constexpr):
    # g, u (T, F) bf16 -> silu(min(g, limit)) * clamp(u) as bf16 (the shared expert, no routing weight)
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < NUMEL
    g = tl.minimum(tl.load(g_ptr + offs, mask=m, other=0.0).to(tl.float32), limit)
    u = tl.load(u_ptr + offs, mask=m, other=0.0).to(tl.float32)
    u = tl.minimum(tl.maximum(u, -limit), limit)
    tl.store(out_ptr + offs, to_bf16(g / (1.0 + tl.exp(-g)) * u, RNE_FIX), mask=m)


# ---- configs ---------------------------------------------------------------------------------------------------
# (BM, BN_UP, BN_DOWN, num_warps) that compile for sm_120 with no spills at Flash sizes (D 4096, F 2048; triton 3.6,
# `kernelbench inspect moe_experts --all-configs`, num_stages 2 and 3). Excluded: (16, 32, 32 / 64, 8 warps), whose
# up-kernel spills 16 bytes at num_stages 2 (ptxas caps 8-warp tiles at 128 registers).
MOE_TILES = ((16, 16, 16, 4), (16, 16, 32, 4), (16, 32, 16, 4), (16, 32, 32, 4), (16, 64, 32, 4), (16, 64, 64, 4),
             (32, 16, 16, 4), (32, 32, 32, 4), (16, 16, 16, 8), (16, 64, 32, 8), (16, 64, 64, 8), (64, 16, 16, 8))


def moe_configs(params: dict) -> list[dict]:
    # DECODE: "bf16" = e2m1 -> bf16 bit patterns with the scale in the exponent, bf16 dots (kernels/linear.py
    # fp4_tile_dot); "fp8" = e2m1 -> e4m3 codes (3 int ops per value), fp8 dots per 32-group (fp4_tile_dot_fp8);
    # "fp8_asm" = the same with the word ops in inline PTX (compiled runs only; the interpreter runs "fp8"), offered
    # for the BN 64 tiles, where it cut the sm_90 K loop by ~25% (it spills on sm_90 at BN 32)
    return [{"BM": bm, "BN_UP": bu, "BN_DOWN": bd, "num_warps": w, "num_stages": s, "DECODE": dec}
            for dec in ("fp8", "bf16") for bm, bu, bd, w in MOE_TILES for s in (2, 3)] + \
        [{"BM": bm, "BN_UP": bu, "BN_DOWN": bd, "num_warps": w, "num_stages": s, "DECODE": "fp8_asm"}
         for bm, bu, bd, w in MOE_TILES if max(bu, bd) >= 64 for s in (2, 3)]


def moe_default(params: dict) -> dict:
    # H200, Flash TP8 moe_layer (2026-11-29): C=1 BN 16/16 117.7 us vs 32/32 136.5 us (more programs on the one
    # or two touched experts); C=16 / 64 BN 32/32 470.6 / 1047.2 us vs 16/16 551.0 / 1279.9 us.
    # DECODE (static SASS, Flash sizes, 4 warps, 2 stages, instructions in the K loop per thread, bf16 -> fp8):
    # sm_90  BN 32: up 882 -> 616, down 506 -> 348 (HMMA: Triton's mma.sync path upcasts fp8 to f16 on sm_90);
    #        BN 64: up 1336 -> 720, down 707 -> 401 (QGMMA); BN 16: up 612 -> 666, down 364 -> 363 (no gain);
    # sm_120 BN 32: up 880 -> 510, down 486 -> 275 (QMMA); BN 64: 1460 -> 503, 785 -> 274; BN 16: 578 -> 539, 340 -> 299.
    # Timed (kernelbench tune moe_experts, H200, 2026-11-29, data/h200-2026-11-29/call3_final): T=1 fp8 BN 16/32
    # 3 stages 125.5 us vs the earlier bf16 BN 16/16 default 172.5 us; T=16 / 64 fp8 BN 32/32 2 stages 393.8 /
    # 610.5 us, the best of the trials (bf16 BN 64/64: 573.8 us at T=16).
    small = params["T"] <= 4
    return {"BM": 16, "BN_UP": 16 if small else 32, "BN_DOWN": 32, "num_warps": 4, "num_stages": 3 if small else 2,
            "DECODE": "fp8"}


# ---- wrappers -------------------------------------------------------------------------------------------------
def _gate_logits(x, weight, bias, tid2eid, token_ids, topk, route_scale):
    """Checks, the gate GEMM's logits (T, E) fp32, the (empty) outputs w, idx and the top-k kernel's arguments. The
    GEMM's config is bf16_linear's at (M = T, N = E, K = D): a tuned entry or pin of bf16_linear sets it."""
    w, idx, topk_args, topk_meta = _gate_args(x, weight, bias, tid2eid, token_ids, topk, route_scale)
    T, D = x.shape
    E = weight.shape[0]
    cfg = lookup("bf16_linear", {"M": T, "N": E, "K": D}, _default(T, E, D, big_m_tile=32))
    _bf16_gemm(x.contiguous().view(T, 1, D), weight.contiguous().view(1, E, D), topk_args[0].view(T, 1, E), cfg,
               False)
    return w, idx, topk_args, topk_meta


def _gate_args(x, weight, bias, tid2eid, token_ids, topk, route_scale):
    """Checks; the (empty) logits (T, E) fp32 and outputs w, idx; the top-k kernel's arguments and meta."""
    check_device(x, weight, token_ids, *(t for t in (bias, tid2eid) if t is not None))
    check_dtype("x", x, torch.bfloat16)
    check_dtype("weight", weight, torch.bfloat16)
    check_dtype("token_ids", token_ids, torch.int64)
    if x.dim() != 2 or weight.dim() != 2 or weight.shape[1] != x.shape[1]:
        raise ValueError(f"moe_gate: x [T, D] and weight [E, D] expected, got {tuple(x.shape)}, {tuple(weight.shape)}")
    T, D = x.shape
    E = weight.shape[0]
    check_shape("token_ids", token_ids, (T,))
    if not 0 < topk <= E:
        raise ValueError(f"moe_gate: topk={topk} must be in 1..{E}")
    if tid2eid is not None:
        check_dtype("tid2eid", tid2eid, torch.int32)
        check_shape("tid2eid", tid2eid, (None, topk))
    if bias is not None:
        check_dtype("bias", bias, torch.float32)
        check_shape("bias", bias, (E,))
    logits = torch.empty((T, E), dtype=torch.float32, device=x.device)
    w = torch.empty((T, topk), dtype=torch.float32, device=x.device)
    idx = torch.empty((T, topk), dtype=torch.int64, device=x.device)
    bias = bias.contiguous() if bias is not None else logits
    tid2eid = tid2eid.contiguous() if tid2eid is not None else logits
    topk_args = (logits, bias, tid2eid, token_ids.contiguous(), w, idx, E, float(route_scale))
    topk_meta = dict(K=topk, KP=triton.next_power_of_2(topk), EP=triton.next_power_of_2(E),
                     HAS_BIAS=bias is not logits and tid2eid is logits, HASH=tid2eid is not logits)
    return w, idx, topk_args, topk_meta


def _gate(x, weight, bias, tid2eid, token_ids, topk, route_scale):
    """The gate GEMM (kernels/linear.py bf16) and _topk_kernel: -> w (T, K) fp32, idx (T, K) int64."""
    w, idx, args, meta = _gate_logits(x, weight, bias, tid2eid, token_ids, topk, route_scale)
    _topk_kernel[(x.shape[0],)](*args, **meta, num_warps=4, num_stages=1)
    return w, idx


# Tokens up to which the gate (GEMV, top-k, and in moe_layer the slot sort + x quant) is one launch by default
# (config GATE "fused", _gate_fused_kernel: the last GEMV program runs the top-k of all rows at once); above, the
# bf16 GEMM (kernels/linear.py) and a top-k / route launch (GATE "gemm").
GATE_FUSE_MAX_T = 4


def gate_default(params: dict) -> dict:
    return {"GATE": "fused" if params["T"] <= GATE_FUSE_MAX_T else "gemm"}


def _gate_mode(cfg, T: int) -> str:
    mode = (cfg or {}).get("GATE") or gate_default({"T": T})["GATE"]
    if mode not in ("fused", "gemm", "mma"):
        raise ValueError(f"moe_gate: config GATE={mode!r}: 'fused', 'gemm' or 'mma' (moe_layer / moe_routed)")
    return mode


# The one-launch gate's warps per program (config GATE_WARPS). 8 since session 35: its GEMV then reads D = 4096 in one
# chunk. Same inputs, graph replay, one token, score routing, 8 vs 4 warps:
# - H200 (data/h200-2026-12-05-session35/call1): moe_gate 6.28 vs 6.82 us (hash 2.76 vs 2.92), moe_layer 28.24 vs
#   28.43 (hash 15.39 vs 15.59); the 43-layer step at C = 1 +0.015 ms faster (95% CI +0.006 .. +0.020, 60 pairs),
#   inside the A/A control's move (-0.006 .. +0.012);
# - H100 (data/h100-2026-12-05-session34, calls 3 and 4): the gate 6.70 / 6.61 vs 7.11 / 7.12 us, moe_layer
#   30.77 / 30.08 vs 31.23 / 31.34; the step +0.007 / +0.005 ms, within noise.
# 1 and 2 warps measured slower (H200, session 11).
GATE_WARPS = 8


def _warps_option(cfg, key: str, default: int, op: str) -> int:
    """Config `key`: warps per program of a gate launch, 1, 2, 4 or 8 (`default` when absent)."""
    w = int((cfg or {}).get(key, default))
    if w not in (1, 2, 4, 8):
        raise ValueError(f"{op}: config {key}={w}: 1, 2, 4 or 8")
    return w


# Config GATE_ROWS' default. "routed" since session 34 (H100, graph replay, Flash TP8, one token, hash routing, the
# same inputs): moe_gate 3.03 vs 5.87 us with "all", moe_layer 16.62 vs 21.11 us (call 3; call 4: 3.13 vs 5.96 and
# 16.67 vs 20.49); the 43-layer step at C = 1 (three hash layers) within noise of the A/A control in both calls
# (data/h100-2026-12-05-session34).
GATE_ROWS_DEFAULT = "routed"


def _gate_rows_option(cfg) -> str:
    """Config GATE_ROWS: which gate rows the one-launch gate scores in hash layers: "routed" (the default: only the K
    experts its table names a token, whose softmax is the weights: 6 rows of 256 at one token, 48 KB of 2 MB) or
    "all" (every expert's, as score routing does; the default before session 34)."""
    rows = (cfg or {}).get("GATE_ROWS", GATE_ROWS_DEFAULT)
    if rows not in ("all", "routed"):
        raise ValueError(f"moe_gate: config GATE_ROWS={rows!r}: 'all' or 'routed'")
    return rows


GATE_TAILS = ("last", "up")


def _gate_tail(cfg, T: int, hashed: bool) -> str:
    """Config GATE_TAIL, where the one-launch gate's top-k runs in moe_layer / moe_routed: "last" (its last program,
    after a ticket: the top-k, w, idx and the slot sort, in series before the routed experts start) or "up" (the
    gate only scores; each routed W1 / W3 program takes the top-k itself after its wait, _local_topk). "up" applies
    at one token with score routing; elsewhere (hash routing reads its ids from the table, more tokens more slots an
    expert) the gate keeps "last", as ROUTE_SORT "slots" falls back for hashed layers. "last" stays the default:
    on an H100 (session 50, data/h100-2026-12-07-session50) "up" with one routed program set took moe_layer alone
    from 30.9 to 29.2 us, but the 43-layer step at C = 1 was slower with it in moe_routed in every form tried
    (0.06-0.19 ms: as built, with SPLIT_UP 4, with its top-k's row padding dropped)."""
    tail = (cfg or {}).get("GATE_TAIL", "last")
    if tail not in GATE_TAILS:
        raise ValueError(f"moe_layer: config GATE_TAIL={tail!r}: 'last' or 'up'")
    return "up" if tail == "up" and T == 1 and not hashed else "last"


# Config GATE_TOPK_ROWS' default: the one-launch gate's last program takes the top-k of a tile of at least this many
# rows (TP = max(GATE_TOPK_ROWS, next power of 2 of T)). One token on a one-row tile (session 50, offline, Flash TP8
# rank shapes, PDL: the gate's sm_90 SASS 1,526 -> 1,275 instructions, 49 -> 39 barriers, 48 -> 40 registers; sm_120
# 1,358 -> 1,123; no spills), the default since session 51: on an H100 (data/h100-2026-12-07-session51/call1) the
# 43-layer step at C = 1 0.016 ms faster (30 pairs, 95% interval +0.009 .. +0.022, A/A -0.004 .. +0.001;
# decode-bench --try 'moe_routed@T=1={"GATE_TOPK_ROWS": 1}'), moe_routed alone 22.91 -> 22.34 us, moe_layer 30.79 ->
# 30.00 us, bit-equal (GPU test). 2 pads one token to two rows, as sessions 5-50 shipped it (in the one-token space).
GATE_TOPK_ROWS = 1


def _gate_topk_rows(cfg) -> int:
    """Config GATE_TOPK_ROWS (above): 1 or 2 (an int; the one-launch gate's only, GATE "fused")."""
    rows = (cfg or {}).get("GATE_TOPK_ROWS", GATE_TOPK_ROWS)
    if type(rows) is not int or rows not in (1, 2):
        raise ValueError(f"moe_gate: config GATE_TOPK_ROWS={rows!r}: 1 or 2")
    return rows


def _gate_warps(cfg) -> int:
    """Config GATE_WARPS: warps per program of the one-launch gate (default GATE_WARPS, 8). Fewer warps make the last program's
    top-k and slot sort (a chain of row reductions) warp shuffles instead of shared-memory rounds."""
    return _warps_option(cfg, "GATE_WARPS", GATE_WARPS, "moe_gate")


def _gate_fused(x, weight, bias, tid2eid, token_ids, topk, route_scale, route=None, warps: int = GATE_WARPS,
                sort: str = "chunk", rows: str = GATE_ROWS_DEFAULT, tail: str = "last",
                topk_rows: int = GATE_TOPK_ROWS):
    """The gate in one launch (_gate_fused_kernel) -> w, idx; with route = (El, expert_offset) also the routing
    buffers of _route (slot sort and act-quantized x, same launch) -> w, idx, buf. `warps` per program (GATE_WARPS);
    `sort`: the slot sort's form (_sort_mode; "slots": from the top-k in registers, score routing only, the hashed
    layers' gate keeps "chunk"); `rows`: GATE_ROWS (_gate_rows_option); `tail` (with route; _gate_tail): "up" leaves
    the top-k, w, idx and the routing lists to the W1 / W3 launch after it; `topk_rows`: GATE_TOPK_ROWS, the top-k
    tile's fewest rows (_gate_topk_rows). With route -> w, idx, buf and that launch's LOCAL arguments
    (_grouped_gemm_kernel; None for "last")."""
    w, idx, args, meta = _gate_args(x, weight, bias, tid2eid, token_ids, topk, route_scale)
    T, D = x.shape
    E = weight.shape[0]
    if T > 64:
        raise ValueError(f"moe_gate: config GATE 'fused' is for small batches (T <= 64), got T={T}")
    slots = sort == "slots" and route is not None and not meta["HASH"]     # hashed ids come from the table: chunk
    sort = "chunk" if sort == "slots" else sort
    topk_tile_rows = max(topk_rows, triton.next_power_of_2(T))
    # 128 GEMV programs for E = 256, each 2 rows of the gate weight in D / BD chunks (BD = 512 x warps: one 4096 chunk
    # at the default 8 warps, 16 fp32 products per thread and row)
    EB, BD = 2, min(D, 512 * warps)
    routed_rows = rows == "routed" and meta["HASH"]
    ngp = T * topk if routed_rows else triton.cdiv(E, EB)
    x = x.contiguous()
    El, offset = route if route is not None else (1, 0)
    buf = _route_buffers(T, topk, D, El, x.device) if route is not None else None
    act, start, order, inv, xq, sx = buf if buf is not None else (idx,) * 6
    grid = ngp + (_xquant_programs(T, D) if route is not None else 0)
    local = route is not None and tail == "up"
    _gate_fused_kernel[(grid,)](
        x, weight.contiguous(), *args[:6], xq, sx, act, start, order, inv, split_tickets(x.device, 1), T, E, ngp,
        float(route_scale), int(offset), El, D=D, **meta, EB=EB, BD=BD, TP=topk_tile_rows,
        SORT=route is not None, **_sort_meta(T, topk, El, sort=sort), GB=XQ_GROUPS, SLOTS=slots, num_warps=warps,
        num_stages=1, ROWS_ROUTED=routed_rows, **pdl_args(x.device, T, weight),
        **trace_args("moe gate (one launch)", grid, x.device), TAIL=not local)
    if route is None:
        return w, idx
    if not local:
        return w, idx, buf, None
    return w, idx, buf, dict(LOCAL=True, logit_ptr=args[0], bias_ptr=args[1], idx_ptr=idx, inv_ptr=inv, E=E, El=El,
                             EP=meta["EP"], route_scale=float(route_scale), offset=int(offset),
                             HAS_BIAS=meta["HAS_BIAS"])


@register_impl("moe_gate", "triton", backend="triton", default_config=gate_default,
               kernels=lambda: [_topk_kernel, _gate_fused_kernel],
               options=frozenset({"GATE_WARPS", "GATE_ROWS", "GATE_TOPK_ROWS"}))
def moe_gate(x, weight, bias, tid2eid, token_ids, topk, route_scale, config=None):
    mode = _gate_mode(config, x.shape[0])
    if mode == "mma":
        raise ValueError("moe_gate: config GATE 'mma' is moe_layer's and moe_routed's (its launch sorts the slots)")
    if mode == "fused":
        return _gate_fused(x, weight, bias, tid2eid, token_ids, topk, route_scale, warps=_gate_warps(config),
                           rows=_gate_rows_option(config), topk_rows=_gate_topk_rows(config))
    return _gate(x, weight, bias, tid2eid, token_ids, topk, route_scale)


@register_impl("moe_gate", "triton_v1", backend="triton", kernels=lambda: [_topk_kernel])
def moe_gate_v1(x, weight, bias, tid2eid, token_ids, topk, route_scale, config=None):
    # the bf16 gate GEMM + _topk_kernel at every T (GATE "gemm"): kept so one bench times both
    return _gate(x, weight, bias, tid2eid, token_ids, topk, route_scale)


def _check_experts(x, weights, indices, w1, s1, w3, s3, w2, s2):
    check_device(x, weights, indices, w1, s1, w3, s3, w2, s2)
    check_dtype("x", x, torch.bfloat16)
    check_dtype("weights", weights, torch.float32)
    check_dtype("indices", indices, torch.int64)
    for n, t in (("w1", w1), ("w3", w3), ("w2", w2)):
        check_dtype(n, t, torch.uint8)
    for n, t in (("s1", s1), ("s3", s3), ("s2", s2)):
        check_dtype(n, t, torch.float8_e8m0fnu)
    if x.dim() != 2 or w1.dim() != 3:
        raise ValueError(f"moe_experts: x must be [T, D] and w1 [El, F, D/2], got {tuple(x.shape)}, {tuple(w1.shape)}")
    T, D = x.shape
    El, F = w1.shape[0], w1.shape[1]
    if D % 128 or F % 128:
        raise ValueError(f"moe_experts: D={D} and F={F} must be multiples of 128")
    check_shape("indices", indices, (T, None))
    check_shape("weights", weights, tuple(indices.shape))
    check_shape("w1", w1, (El, F, D // 2))
    check_shape("w3", w3, (El, F, D // 2))
    check_shape("w2", w2, (El, D, F // 2))
    check_shape("s1", s1, (El, F, D // 32))
    check_shape("s3", s3, (El, F, D // 32))
    check_shape("s2", s2, (El, D, F // 32))


def _routed(x, weights, indices, w1, s1, w3, s3, w2, s2, expert_offset, swiglu_limit, cfg, shared, out_dtype):
    T, D = x.shape
    K = indices.shape[1]
    El, F = w1.shape[0], w1.shape[1]
    TK = T * K
    dev = x.device
    # 1. group slots by local expert, on the device
    key = indices.reshape(-1) - expert_offset
    key = torch.where((key >= 0) & (key < El), key, torch.full_like(key, El))
    counts = torch.zeros(El + 1, dtype=torch.int32, device=dev).scatter_add_(0, key, torch.ones_like(key, dtype=torch.int32))
    start = torch.zeros(El + 2, dtype=torch.int32, device=dev)
    start[1:] = torch.cumsum(counts, 0)
    order = torch.argsort(key, stable=True).to(torch.int32)          # (TK,) slots grouped by expert
    fp8 = cfg.get("DECODE", "bf16") in ("fp8", "fp8_asm") and all(w.data_ptr() % 4 == 0 for w in (w1, w3, w2))  # read as words
    if fp8:     # e4m3 codes + fp32 UE8M0 scales: the same values fp8_simulate gives, for fp8 x fp8 dots
        xs, sxs = _launch_fp8(x, 128, "ue8m0", False, None, "act_quant_fp8")
    else:
        xs = _launch_fp8(x, 128, "ue8m0", True, None, "fp8_simulate")[0]     # (T, D) bf16, the GEMM's fp8 values
        sxs = order                                                      # unused (no scales)
    rw = weights.contiguous().view(-1)
    w1, w3, w2 = w1.contiguous(), w3.contiguous(), w2.contiguous()
    s1, s3, s2 = s1.contiguous(), s3.contiguous(), s2.contiguous()
    a = torch.empty((TK, F), dtype=torch.bfloat16, device=dev)
    ybuf = torch.empty((TK, D), dtype=torch.float32, device=dev)
    common = dict(FP8_DOT=fp8, ASM=fp8 and cfg["DECODE"] == "fp8_asm" and not INTERPRET, DOT_UPCAST=INTERPRET,
                  RNE_FIX=INTERPRET, num_warps=cfg["num_warps"], num_stages=cfg["num_stages"])
    # 2. W1 / W3 + SwiGLU + routing weight
    _moe_up_kernel[(El, F // cfg["BN_UP"])](
        xs, sxs, rw, order, start, w1, s1.view(torch.uint8), w3, s3.view(torch.uint8), a, float(swiglu_limit),
        D=D, F=F, K=K, BM=cfg["BM"], BN=cfg["BN_UP"], **common)
    # 3. W2 per expert into per-slot rows (its input act-quantized per 128 first, as fp4_linear does)
    if fp8:
        a, sa = _launch_fp8(a, 128, "ue8m0", False, None, "act_quant_fp8")
    else:
        a, sa = _launch_fp8(a, 128, "ue8m0", True, None, "fp8_simulate")[0], order
    _moe_down_kernel[(El, D // cfg["BN_DOWN"])](
        a, sa, order, start, w2, s2.view(torch.uint8), ybuf, D=D, F=F, BM=cfg["BM"], BN=cfg["BN_DOWN"], **common)
    # 4. deterministic combine (+ shared expert)
    out = torch.empty((T, D), dtype=out_dtype, device=dev)
    BLOCK = 1024
    _combine_kernel[(T, triton.cdiv(D, BLOCK))](
        ybuf, indices.contiguous(), shared if shared is not None else x, out, D, int(expert_offset), El, K=K,
        BLOCK=BLOCK, HAS_SHARED=shared is not None, OUT_BF16=out_dtype == torch.bfloat16, RNE_FIX=INTERPRET,
        num_warps=4, num_stages=1)
    return out


def _experts_key(x, indices, w1):
    return {"T": x.shape[0], "D": x.shape[1], "El": w1.shape[0], "F": w1.shape[1], "K": indices.shape[1]}


@register_impl("moe_experts", "triton_v1", backend="triton", configs=moe_configs, default_config=moe_default,
               deterministic=True, kernels=lambda: [_moe_up_kernel, _moe_down_kernel, _combine_kernel])
def moe_experts_v1(x, weights, indices, w1, s1, w3, s3, w2, s2, expert_offset, swiglu_limit, shared_w1=None,
                   shared_s1=None, shared_w3=None, shared_s3=None, shared_w2=None, shared_s2=None, config=None):
    _check_experts(x, weights, indices, w1, s1, w3, s3, w2, s2)
    hw = _shared_inputs(shared_w1, shared_s1, shared_w3, shared_s3, shared_w2, shared_s2)
    key = _experts_key(x, indices, w1)
    cfg = config or lookup("moe_experts", key, moe_default({**key, "E": max(key["El"], 1)}))
    shared = _shared(x, **hw, swiglu_limit=swiglu_limit) if hw else None
    return _routed(x, weights, indices, w1, s1, w3, s3, w2, s2, expert_offset, swiglu_limit, cfg, shared,
                   torch.float32)


def _shared_inputs(w1, s1, w3, s3, w2, s2) -> dict | None:
    """moe_experts' optional shared expert (all six tensors or none) -> {w1: .., s2: ..} or None."""
    hw = dict(w1=w1, s1=s1, w3=w3, s3=s3, w2=w2, s2=s2)
    given = [k for k, v in hw.items() if v is not None]
    if given and len(given) < 6:
        raise ValueError(f"moe_experts: give all six shared expert tensors (shared_w1 .. shared_s2) or none, got "
                         f"{', '.join('shared_' + k for k in given)}")
    return hw if given else None


def _shared(x, w1, s1, w3, s3, w2, s2, swiglu_limit):
    check_device(x, w1, s1, w3, s3, w2, s2)
    for n, t in (("w1", w1), ("w3", w3), ("w2", w2)):
        check_dtype(n, t, torch.float8_e4m3fn)
    g = fp8_linear(x, w1, s1)
    u = fp8_linear(x, w3, s3)
    if g.shape != u.shape:
        raise ValueError(f"shared_expert: w1 and w3 shapes differ: {tuple(w1.shape)} vs {tuple(w3.shape)}")
    a = torch.empty_like(g)
    BLOCK = 1024
    _swiglu_kernel[(triton.cdiv(g.numel(), BLOCK),)](g, u, a, g.numel(), float(swiglu_limit), BLOCK=BLOCK,
                                                     RNE_FIX=INTERPRET, num_warps=4, num_stages=1)
    return fp8_linear(a, w2, s2)


@register_impl("shared_expert", "triton", backend="triton", kernels=lambda: [_swiglu_kernel])
def shared_expert(x, w1, s1, w3, s3, w2, s2, swiglu_limit, config=None):
    return _shared(x, w1, s1, w3, s3, w2, s2, swiglu_limit)


@register_impl("moe_layer", "triton_v1", backend="triton", configs=moe_configs, default_config=moe_default,
               deterministic=True,
               kernels=lambda: [_topk_kernel, _moe_up_kernel, _moe_down_kernel, _combine_kernel, _swiglu_kernel])
def moe_layer_v1(x, weight, bias, tid2eid, token_ids, topk, route_scale, w1, s1, w3, s3, w2, s2, expert_offset,
              swiglu_limit, shared_w1, shared_s1, shared_w3, shared_s3, shared_w2, shared_s2, config=None):
    w, idx = _gate(x, weight, bias, tid2eid, token_ids, topk, route_scale)
    _check_experts(x, w, idx, w1, s1, w3, s3, w2, s2)
    shared = _shared(x, shared_w1, shared_s1, shared_w3, shared_s3, shared_w2, shared_s2, swiglu_limit)
    key = _experts_key(x, idx, w1)
    cfg = config or lookup("moe_layer", key, moe_default({**key, "E": weight.shape[0]}))
    return _routed(x, w, idx, w1, s1, w3, s3, w2, s2, expert_offset, swiglu_limit, cfg, shared, torch.bfloat16)


# ==== grouped experts (impl "triton"): a device-built work list, split K, no torch glue ===========================
# Glue v4 (the default; config GLUE, impls triton_glue3 / triton_glue2 keep v3 / v2 for comparison). moe_layer is
# 4 launches (gate GEMM, 1, 2, 3), moe_experts 3 (1, 2, 3):
# 1. `_gate_route_kernel`: moe_layer: programs 0..T-1 pick each token's top-k (_topk_row) and take a ticket; the last
#    to arrive groups the slots by local expert (_sort_slots: counts, start offsets, the list of ACTIVE experts,
#    sorted slots and each slot's sorted position: a stable counting sort, vectorized per 128-slot chunk, no host
#    sync); moe_experts: program 0 sorts the given indices. The other programs act-quantize x (e4m3 codes + UE8M0
#    scales, group 128), 4 groups each;
# 2. `_grouped_gemm_kernel` (GATED: W1 and W3), grid ((shared +) min(El, TK)) * F/BN * S): one program per (work
#    item, F tile, K split); item 0 is the fused shared expert (when there is one), the others the active experts;
#    programs past the number of active experts exit at once, so at C=1 the whole grid streams the one touched
#    expert (S K-splits x F/BN tiles), fp32 partials (S, ROWS, 2F) of g and u by sorted position. FIN: the last
#    program of each (item, 128-column group) sums the S partials in order, bf16 rounding, clamp, SwiGLU, routing
#    weight, bf16, act-quant (group 128): the W2 input as e4m3 codes + scales (v2 / v3: `_swiglu_quant_kernel`);
# 3. `_grouped_gemm_kernel` (not GATED: W2), as 2 over D tiles, split over F, fp32 partials (S, ROWS, D). FIN: the
#    last program of each D tile combines its columns: per token, per k in order, bf16(sum of the S partials),
#    summed in k order (+ the shared expert) (v2 / v3: `_grouped_combine_kernel`).
# Every reduction has a fixed order whoever arrives last: deterministic, no float atomics (int32 tickets, each reset
# by the program that took the last one: no memset, CUDA-graph capturable).
@triton.jit
def pair_codes_e4m3(b, ASM: tl.constexpr):
    """PAIR64 bytes (BN, 32) uint8 -> (lo, hi) e4m3 codes of their low and high nibbles (e2m1 -> e4m3: the value
    times 2^6, which the scale products take back). ASM: the word ops in inline PTX, 4 bytes per 32-bit op (compiled
    runs only; the wrapper passes ASM = False under the interpreter)."""
    if ASM:
        lo, hi = tl.inline_asm_elementwise(
            "{.reg .b32 t; shl.b32 t, $2, 2; and.b32 $0, t, 0x1C1C1C1C; shl.b32 t, $2, 4; and.b32 t, t, "
            "0x80808080; or.b32 $0, $0, t; shr.b32 t, $2, 2; and.b32 t, t, 0x1C1C1C1C; and.b32 $1, $2, "
            "0x80808080; or.b32 $1, $1, t;}", "=r,=r,r", [b], dtype=(tl.uint8, tl.uint8), is_pure=True, pack=4)
        return lo.to(tl.float8e4nv, bitcast=True), hi.to(tl.float8e4nv, bitcast=True)
    bi = b.to(tl.int32)
    return fp4_lo_e4m3(bi), fp4_hi_e4m3(bi)


@triton.jit
def fp4_pair_dot(acc, w_ptr, s_ptr, rn, LDW, LDS, kb, xq_ptr, sx_ptr, rows, rmask, LDX, ASM: tl.constexpr):
    """fp4_tile_dot_fp8 (kernels/linear.py) for the PAIR64 weight layout (`prepare_expert_weights`): in each 64-value
    chunk of a row, byte j holds value j in its low nibble and value 32 + j in its high nibble, so the low nibbles of
    32 bytes are one whole scale group in k order and the high nibbles the next: the e2m1 -> e4m3 decode is word ops
    on the loaded bytes (lo / hi codes of 4 bytes per 32-bit op with ASM) and no byte interleave (join) is needed."""
    rj = tl.arange(0, 32)
    xrow = xq_ptr + rows[:, None].to(tl.int64) * LDX + kb * 128 + rj[None, :]
    sx = tl.load(sx_ptr + rows.to(tl.int64) * (LDX // 128) + kb, mask=rmask, other=0.0)     # (BM,)
    kacc = tl.zeros(acc.shape, dtype=tl.float32)
    for h in tl.static_range(2):
        b = tl.load(w_ptr + rn[:, None] * LDW + kb * 64 + h * 32 + rj[None, :])                # (BN, 32) bytes
        lo, hi = pair_codes_e4m3(b, ASM)
        sw = s_ptr + rn * LDS + kb * 4 + 2 * h
        s0 = pow2(tl.load(sw).to(tl.int32) - 121)                                             # 2^(e - 127) * 64
        s1 = pow2(tl.load(sw + 1).to(tl.int32) - 121)
        x0 = tl.load(xrow + h * 64, mask=rmask[:, None], other=0.0)                           # (BM, 32) e4m3
        x1 = tl.load(xrow + h * 64 + 32, mask=rmask[:, None], other=0.0)
        kacc += tl.dot(lo, tl.trans(x0)) * s0[:, None]
        kacc += tl.dot(hi, tl.trans(x1)) * s1[:, None]
    return acc + kacc * sx[None, :]


@triton.jit
def scale_word(s_ptr, rn, LDS, kb):
    """The 4 UE8M0 scales of K block kb (groups 4 kb .. 4 kb + 3, byte g = group 4 kb + g) of rows rn as one 32-bit
    word per row: one load instead of four byte loads (s_ptr rows of LDS bytes, LDS % 4 == 0, 4-byte aligned)."""
    return tl.load((s_ptr + rn * LDS + kb * 4).to(tl.pointer_type(tl.int32)))


@triton.jit
def fp4_pair_dot_w(acc, w_ptr, sw, sx, rn, LDW, kb, xq_ptr, rows, rmask, LDX, ASM: tl.constexpr):
    """fp4_pair_dot with the K block's weight scales sw (BN,) int32 (scale_word) and activation scales sx (BM,) fp32
    given: the caller loads them a K block ahead (they do not feed a dot, so the pipeliner does not stream them)."""
    rj = tl.arange(0, 32)
    xrow = xq_ptr + rows[:, None].to(tl.int64) * LDX + kb * 128 + rj[None, :]
    kacc = tl.zeros(acc.shape, dtype=tl.float32)
    for h in tl.static_range(2):
        lo, hi, s0, s1 = _pair_codes_scales(w_ptr, sw, rn, LDW, kb, h, ASM)    # the weight bytes before x: the
        x0 = tl.load(xrow + h * 64, mask=rmask[:, None], other=0.0)             # other order spills 16 B of
        x1 = tl.load(xrow + h * 64 + 32, mask=rmask[:, None], other=0.0)        # registers on sm_120 (moe_layer T=16)
        kacc = _pair_dots(kacc, lo, hi, s0, s1, x0, x1)
    return acc + kacc * sx[None, :]


@triton.jit
def fp4_pair_dot_w2(acca, accb, wa_ptr, wb_ptr, swa, swb, sx, rn, LDW, kb, xq_ptr, rows, rmask, LDX,
                    ASM: tl.constexpr):
    """fp4_pair_dot_w for W1 and W3 together (config X_ONCE): each (BM, 32) tile of x is loaded once and feeds the
    dots of both weights (two fp4_pair_dot_w calls load it twice). Same arithmetic, same order per accumulator."""
    rj = tl.arange(0, 32)
    xrow = xq_ptr + rows[:, None].to(tl.int64) * LDX + kb * 128 + rj[None, :]
    ka = tl.zeros(acca.shape, dtype=tl.float32)
    kb_ = tl.zeros(accb.shape, dtype=tl.float32)
    for h in tl.static_range(2):
        x0 = tl.load(xrow + h * 64, mask=rmask[:, None], other=0.0)                           # (BM, 32) e4m3
        x1 = tl.load(xrow + h * 64 + 32, mask=rmask[:, None], other=0.0)
        ka = _pair_half(ka, wa_ptr, swa, rn, LDW, kb, h, x0, x1, ASM)
        kb_ = _pair_half(kb_, wb_ptr, swb, rn, LDW, kb, h, x0, x1, ASM)
    return acca + ka * sx[None, :], accb + kb_ * sx[None, :]


@triton.jit
def _pair_half(kacc, w_ptr, sw, rn, LDW, kb, h: tl.constexpr, x0, x1, ASM: tl.constexpr):
    """One 64-value half h of K block kb of fp4_pair_dot_w, x given: the two 32-groups' dots, each times its scale."""
    lo, hi, s0, s1 = _pair_codes_scales(w_ptr, sw, rn, LDW, kb, h, ASM)
    return _pair_dots(kacc, lo, hi, s0, s1, x0, x1)


@triton.jit
def group_scale(sw, g: tl.constexpr):
    """Byte g of a K block's scale word (scale_word) as the fp32 factor of the e4m3 codes of its 32-group:
    2^(e - 127) * 64 (the decode's codes carry 2^6)."""
    return ((((sw >> (8 * g)) & 255) + 6) << 23).to(tl.float32, bitcast=True)


@triton.jit
def _pair_codes_scales(w_ptr, sw, rn, LDW, kb, h: tl.constexpr, ASM: tl.constexpr):
    """Half h of K block kb: the (BN, 32) PAIR64 bytes decoded to the two groups' e4m3 codes, and the two groups'
    scales (fp32, times 2^-6 for the codes' 2^6) from the block's scale word sw."""
    rj = tl.arange(0, 32)
    b = tl.load(w_ptr + rn[:, None] * LDW + kb * 64 + h * 32 + rj[None, :])                    # (BN, 32) bytes
    lo, hi = pair_codes_e4m3(b, ASM)
    return lo, hi, group_scale(sw, 2 * h), group_scale(sw, 2 * h + 1)


@triton.jit
def _pair_dots(kacc, lo, hi, s0, s1, x0, x1):
    kacc += tl.dot(lo, tl.trans(x0)) * s0[:, None]
    kacc += tl.dot(hi, tl.trans(x1)) * s1[:, None]
    return kacc


@triton.jit
def bdiag_x(xq_ptr, rows2, rmask2, LDX, kb, BM: tl.constexpr):
    """Config BDIAG: K block kb of x as two block-diagonal (2 BM, 64) e4m3 tiles, the B operands of one 64-deep dot
    per nibble half (rows2 = the BM input rows twice). lo: row t < BM holds group 0 (k 0..31) in columns 0..31, row
    BM + t group 2 (k 64..95) in columns 32..63, zeros elsewhere; hi: groups 1 and 3 likewise. Against the PAIR64
    nibble tiles (lo = groups 0 | 2, hi = 1 | 3) each dot gives two groups' products side by side (BN, 2 BM): the
    zeros keep the groups apart, so one dot (two k32 MMAs, one wait) does the work of two."""
    r = tl.arange(0, 2 * BM)
    c = tl.arange(0, 64)
    keep = ((r[:, None] < BM) == (c[None, :] < 32)) & rmask2[:, None]
    base = xq_ptr + rows2[:, None].to(tl.int64) * LDX + kb * 128 + (c % 32)[None, :] + 64 * (r >= BM)[:, None]
    xlo = tl.load(base, mask=keep, other=0.0)
    xhi = tl.load(base + 32, mask=keep, other=0.0)
    return xlo, xhi


@triton.jit
def fp4_pair_dot_bd(acc2, w_ptr, sw, sx2, rn, LDW, kb, xlo, xhi, ASM: tl.constexpr, BM: tl.constexpr):
    """Config BDIAG: K block kb of a PAIR64 weight against bdiag_x's tiles. acc2 (BN, 2 BM): columns t < BM sum
    groups 0 and 1 of every K block, columns BM + t groups 2 and 3 (fold_halves adds them at the end); sw the
    block's scale word, sx2 (2 BM,) the x scales of rows2."""
    b = tl.load(w_ptr + rn[:, None] * LDW + kb * 64 + tl.arange(0, 64)[None, :])             # (BN, 64) bytes
    lo, hi = pair_codes_e4m3(b, ASM)                                                        # groups 0 | 2, 1 | 3
    dlo = tl.dot(lo, tl.trans(xlo))
    dhi = tl.dot(hi, tl.trans(xhi))
    first = (tl.arange(0, 2 * BM) < BM)[None, :]
    slo = tl.where(first, group_scale(sw, 0)[:, None], group_scale(sw, 2)[:, None])
    shi = tl.where(first, group_scale(sw, 1)[:, None], group_scale(sw, 3)[:, None])
    return acc2 + (dlo * slo + dhi * shi) * sx2[None, :]


@triton.jit
def fold_halves(acc2, BN: tl.constexpr, BM: tl.constexpr):
    """(BN, 2 BM) -> (BN, BM): column t plus column BM + t (BDIAG's two halves of each token)."""
    return tl.sum(tl.reshape(acc2, (BN, 2, BM)), axis=1)


@triton.jit
def fp8_tile_dot(acc, w_ptr, ws_ptr, n0, rn, LDW, kb, xq, sx, swbyte=None, PROMOTE: tl.constexpr = 0):
    """The shared expert's FP8 weights: acc (BN, BM) += W[rn, 128 kb : +128] . xq^T * sw * sx, W e4m3 rows of LDW
    values with one e8m0 scale per 128 x 128 block (ws rows of LDW / 128; BN divides 128), xq (BM, 128) e4m3 codes
    of the rows' K block kb with fp32 scales sx (BM,) (the arithmetic of kernels/linear.py _fp8_gemm_kernel).
    swbyte: the block's scale byte loaded already (config SHARED_SCALES "ahead"), else loaded here. PROMOTE:
    KERNELBENCH_FP8_PROMOTE (kernels/common.py fp8_dot)."""
    rk = tl.arange(0, 128)
    w = tl.load(w_ptr + rn[:, None] * LDW + kb * 128 + rk[None, :])
    if swbyte is None:
        swbyte = tl.load(ws_ptr + (n0 // 128) * (LDW // 128) + kb)                                # rn = n0 + 0..BN-1
    sw = pow2(swbyte.to(tl.int32) - 127)
    return acc + fp8_dot(w, tl.trans(xq), PROMOTE) * (sx * sw)[None, :]


@triton.jit
def x_tile(xq_ptr, sx_ptr, rows, rmask, kb, LDX):
    """K block kb of the act-quantized rows: e4m3 codes (BM, 128) and their fp32 scales (BM,) (0 for masked rows)."""
    rk = tl.arange(0, 128)
    xq = tl.load(xq_ptr + rows[:, None].to(tl.int64) * LDX + kb * 128 + rk[None, :], mask=rmask[:, None], other=0.0)
    sx = tl.load(sx_ptr + rows.to(tl.int64) * (LDX // 128) + kb, mask=rmask, other=0.0)
    return xq, sx


@triton.jit
def x_tile_own(x_ptr, rows, rmask, kb, LDX):
    """x_tile from the bf16 rows themselves: the act-quantization the routing launch does (_quant_x_block), of one
    K block, in registers: the same codes and scales bit for bit."""
    rk = tl.arange(0, 128)
    v = tl.load(x_ptr + rows[:, None].to(tl.int64) * LDX + kb * 128 + rk[None, :], mask=rmask[:, None],
                other=0.0).to(tl.float32)
    code, sc = _quant_groups(v)
    return code.to(tl.uint8).to(tl.float8e4nv, bitcast=True), tl.where(rmask, sc, 0.0)


@triton.jit
def _quant_groups(v):
    """(G, 128) fp32 -> e4m3 codes (int32) and UE8M0 scales (G,) fp32: the act_quant_fp8 rounding (kernels/quant.py)."""
    amax = tl.maximum(tl.max(tl.abs(v), axis=1), 1e-4)
    se = ue8m0_exp(amax, 8, 0x600000)                                    # 448 = 1.75 * 2^8
    q = tl.minimum(tl.maximum(v * pow2(-se)[:, None], -448.0), 448.0)
    code, _ = e4m3_round_code(q)
    return code, pow2(se)


@triton.jit
def _route_kernel(idx_ptr, x_ptr, xq_ptr, sx_ptr, act_ptr, start_ptr, sorted_ptr, inv_ptr, TK, offset, El,
                  D: tl.constexpr, ELP: tl.constexpr, CH: tl.constexpr, GB: tl.constexpr):
    # idx (TK,) int64 expert per slot; x (T, D) bf16 -> xq (T, D) e4m3 codes, sx (T, D/128) fp32;
    # act (El + 1,) int32: [n_active, active local experts ascending]; start (El + 1,) int32 offsets by expert
    # (start[El] = number of local slots); sorted (TK,) int32 slots by (expert, slot); inv (TK,) int32 position
    # of each slot in sorted, -1 for a slot whose expert is not local
    pid = tl.program_id(0)
    if pid == 0:
        e = tl.arange(0, ELP)
        j = tl.arange(0, CH)
        counts = tl.zeros((ELP,), dtype=tl.int32)
        for c0 in range(0, TK, CH):
            i = c0 + j
            key = tl.load(idx_ptr + i, mask=i < TK, other=-1) - offset
            key = tl.where((key >= 0) & (key < El) & (i < TK), key, -1).to(tl.int32)
            counts += tl.sum((key[:, None] == e[None, :]).to(tl.int32), axis=0)
        start = tl.cumsum(counts, axis=0) - counts
        tl.store(start_ptr + e, start, mask=e < El)
        tl.store(start_ptr + El, tl.sum(counts, axis=0))
        flag = (counts > 0).to(tl.int32)
        tl.store(act_ptr + 1 + tl.cumsum(flag, axis=0) - flag, e, mask=flag > 0)
        tl.store(act_ptr, tl.sum(flag, axis=0))
        nxt = start                                                       # next free position per expert
        for c0 in range(0, TK, CH):
            i = c0 + j
            key = tl.load(idx_ptr + i, mask=i < TK, other=-1) - offset
            key = tl.where((key >= 0) & (key < El) & (i < TK), key, -1).to(tl.int32)
            hot = key[:, None] == e[None, :]                               # (CH, ELP)
            before = tl.sum(((key[None, :] == key[:, None]) & (j[None, :] < j[:, None])).to(tl.int32), axis=1)
            pos = tl.sum(tl.where(hot, nxt[None, :], 0), axis=1) + before
            local = key >= 0
            tl.store(sorted_ptr + pos, i, mask=local)
            tl.store(inv_ptr + i, tl.where(local, pos, -1), mask=i < TK)
            nxt += tl.sum(hot.to(tl.int32), axis=0)
    else:
        row = (pid - 1).to(tl.int64)
        NG: tl.constexpr = D // 128
        for g0 in range(0, NG, GB):
            g = g0 + tl.arange(0, GB)
            offs = g[:, None] * 128 + tl.arange(0, 128)[None, :]
            gm = g < NG
            v = tl.load(x_ptr + row * D + offs, mask=gm[:, None], other=0.0).to(tl.float32)
            code, s = _quant_groups(v)
            tl.store(xq_ptr + row * D + offs, code.to(tl.uint8), mask=gm[:, None])
            tl.store(sx_ptr + row * NG + g, s, mask=gm)


@triton.jit
def _local_keys(idx_ptr, i, TK, offset, El):
    """Slot i's local expert (int32), -1 for a slot past TK or whose expert is not on this rank. `.cg`: the slots may
    have been written by other programs of the same launch (_gate_route_kernel's top-k programs)."""
    key = tl.load(idx_ptr + i, mask=i < TK, other=-1, cache_modifier=".cg") - offset
    return tl.where((key >= 0) & (key < El) & (i < TK), key, -1).to(tl.int32)


@triton.jit
def _expert_lists(counts, e, valid, El, act_ptr, start_ptr):
    """From the slot counts per local expert: lanes ordered by local expert e, `valid` where e is one (0..El-1; the
    other lanes count 0): start offsets (+ the total at El), the list of ACTIVE experts and the item table;
    -> start per lane."""
    start = tl.cumsum(counts, axis=0) - counts
    tl.store(start_ptr + e, start, mask=valid)
    tl.store(start_ptr + El, tl.sum(counts, axis=0))
    flag = (counts > 0).to(tl.int32)
    rank = tl.cumsum(flag, axis=0) - flag                                 # place of each active expert in the list
    tl.store(act_ptr + 1 + rank, e, mask=flag > 0)
    n_act = tl.sum(flag, axis=0)
    tl.store(act_ptr, n_act)
    # the item table (config ITEM_TABLE): row i = (expert, start, end, 0) of the i-th active expert, rows n_act..El-1
    # empty (0, 0, 0, 0), from int32 index item_table_offset(El) of act: a GEMM program reads its item in one trip
    tb = act_ptr + ((El + 4) // 4) * 4
    slot = tl.where(flag > 0, rank, n_act + e - rank)                      # inactive experts fill rows n_act..
    row = tl.where(flag > 0, e, 0)
    tl.store(tb + 4 * slot, row, mask=valid)
    tl.store(tb + 4 * slot + 1, tl.where(flag > 0, start, 0), mask=valid)
    tl.store(tb + 4 * slot + 2, tl.where(flag > 0, start + counts, 0), mask=valid)
    return start


@triton.jit
def _route_from_slots(slot, e, t, tm, act_ptr, start_ptr, sorted_ptr, inv_ptr, K: tl.constexpr, offset, El):
    """_route_lists' lists from a top-k still in registers (config ROUTE_SORT "slots", the one-launch gate's last
    program): slot (TP, EP) each expert's place in its row's top-K (_topk_slots; K when not chosen), e (EP,) the
    expert ids, t (TP,) the rows (tm: t < T). No reload of the stored ids (two L2 round trips of _sort_slots at one
    token). A top-k holds an expert at most once a row, so an expert's slots in slot order are its rows in token
    order: slot (t, k) of expert e goes to start[e] + (rows before t that chose e), an exclusive scan down the rows."""
    el = e - offset                                                       # the local expert of each lane
    local = (el >= 0) & (el < El)
    hit = (slot < K) & tm[:, None] & local[None, :]                       # (TP, EP): a local slot
    hot = hit.to(tl.int32)
    start = _expert_lists(tl.sum(hot, axis=0), el, local, El, act_ptr, start_ptr)
    if hot.shape[0] == 1:      # one row: nothing before it (Triton 3.6 fails to compile a scan over a 1-row tile)
        pos = start[None, :] + hot * 0
    else:
        pos = start[None, :] + tl.cumsum(hot, axis=0) - hot
    i = t[:, None] * K + slot
    tl.store(sorted_ptr + pos, i, mask=hit)
    tl.store(inv_ptr + i, tl.where(hit, pos, -1), mask=(slot < K) & tm[:, None])


@triton.jit
def _local_topk(writer, logit_ptr, bias_ptr, w_ptr, idx_ptr, act_ptr, start_ptr, sorted_ptr, inv_ptr, E, route_scale,
                offset, El, K: tl.constexpr, EP: tl.constexpr, HAS_BIAS: tl.constexpr):
    """Config GATE_TAIL "up", one token, score routing: a routed W1 / W3 program's own top-k from the gate's logits
    (1, E), with the gate's last program's arithmetic (_row_scores, _topk_slots, _log_normalise). The `writer`
    program also stores what the gate's last program would (_store_topk_slots: w, idx; _route_from_slots: the
    routing lists), which the W2 launch reads after its wait.
    -> (chosen: (EP,) 1 for each chosen local expert, el: (EP,) the lanes' local expert ids, nw: (2, EP) the
    normalised weights of the token's choices (row 1 padding: 0), n: how many local experts the token chose), for
    _local_pick."""
    rows, rm, ids, sc, ls = _row_scores(0, 1, logit_ptr, bias_ptr, E, EP, HAS_BIAS, 2, True)
    slot = _topk_slots(sc, ids[None, :], K)
    if writer:
        _store_topk_slots(ls, ids[None, :], slot, rows, rm, w_ptr, idx_ptr, route_scale, K)
        _route_from_slots(slot, ids, rows, rm, act_ptr, start_ptr, sorted_ptr, inv_ptr, K, offset, El)
    el = ids - offset
    hit = ((slot < K) & rm[:, None] & ((el >= 0) & (el < El))[None, :]).to(tl.int32)     # (2, EP): row 1 padding
    chosen = tl.sum(hit, axis=0)                                          # (EP,) 1 for a chosen local expert
    nw = tl.where(rm[:, None], _log_normalise(ls, slot < K, route_scale), 0.0)
    return chosen, el, nw, tl.sum(chosen, axis=0)


@triton.jit
def _local_pick(item, chosen, el, nw):
    """Item i of _local_topk's selection: the i-th of the token's chosen local experts in ascending order (the place
    the slot sort gives it: one slot an expert at one token, start i, end i + 1) -> (its local expert, its
    weight)."""
    mine = (chosen > 0) & (tl.cumsum(chosen, axis=0) - chosen == item)   # the item's expert: its rank among them
    e = tl.sum(tl.where(mine, el, 0), axis=0)
    rw = tl.sum(tl.sum(tl.where(mine[None, :], nw, 0.0), axis=1), axis=0)
    return e, rw


@triton.jit
def _route_lists(idx_ptr, act_ptr, start_ptr, sorted_ptr, inv_ptr, T, K: tl.constexpr, offset, El,
                 ELP: tl.constexpr, CH: tl.constexpr, TS: tl.constexpr, KW: tl.constexpr):
    """The routing lists of T tokens' K slots each, in one program: _sort_slots_by_token when TS (the tokens padded
    to a power of two, config ROUTE_SORT "token"), else _sort_slots in chunks of CH slots ("chunk")."""
    if TS > 0:
        _sort_slots_by_token(idx_ptr, act_ptr, start_ptr, sorted_ptr, inv_ptr, T, K, offset, El, ELP, TS, KW)
    else:
        _sort_slots(idx_ptr, act_ptr, start_ptr, sorted_ptr, inv_ptr, T * K, offset, El, ELP, CH)


@triton.jit
def _sort_slots(idx_ptr, act_ptr, start_ptr, sorted_ptr, inv_ptr, TK, offset, El, ELP: tl.constexpr,
                CH: tl.constexpr):
    """The routing lists of _route_kernel (program 0), vectorized: a stable counting sort of the TK slots by local
    expert in one program, CH slots at a time. Pass 1 counts per expert -> start offsets and the active list; pass 2
    gives each slot of a chunk its position start[e] + (earlier slots of e) + (its rank among the chunk's slots of e,
    an inclusive cumsum down the (CH, ELP) one-hot matrix). ELP >= El, a power of two."""
    e = tl.arange(0, ELP)
    j = tl.arange(0, CH)
    counts = tl.zeros((ELP,), dtype=tl.int32)
    for c0 in range(0, TK, CH):
        key = _local_keys(idx_ptr, c0 + j, TK, offset, El)
        counts += tl.sum((key[:, None] == e[None, :]).to(tl.int32), axis=0)
    start = _expert_lists(counts, e, e < El, El, act_ptr, start_ptr)
    nxt = start                                                           # next free position per expert
    for c0 in range(0, TK, CH):
        i = c0 + j
        hot = (_local_keys(idx_ptr, i, TK, offset, El)[:, None] == e[None, :]).to(tl.int32)     # (CH, ELP)
        pos = tl.sum(hot * (nxt[None, :] + tl.cumsum(hot, axis=0)), axis=1) - 1   # -1: no local expert
        tl.store(sorted_ptr + pos, i, mask=pos >= 0)
        tl.store(inv_ptr + i, pos, mask=i < TK)
        nxt += tl.sum(hot, axis=0)


@triton.jit
def _sort_slots_by_token(idx_ptr, act_ptr, start_ptr, sorted_ptr, inv_ptr, T, K: tl.constexpr, offset, El,
                         ELP: tl.constexpr, TS: tl.constexpr, KW: tl.constexpr):
    """The same stable counting sort with the scan over TOKENS instead of slots (T <= TS): one load of the (T, K)
    keys; hot[t, e] = token t's slots of local expert e; slot (t, k) of expert e goes to start[e] + (slots of e in
    tokens before t: an exclusive cumsum of hot down the tokens) + (earlier k' < k of token t with expert e: none
    for a top-k, whose experts differ, but given indices may repeat one). One (TS, ELP) scan instead of one per CH
    slots, and one round trip of key loads instead of one per chunk and pass."""
    t = tl.arange(0, TS)
    e = tl.arange(0, ELP)
    kk = tl.arange(0, KW)                                                 # KW: K padded to a power of two >= 2
    km = (t[:, None] < T) & (kk[None, :] < K)
    raw = tl.load(idx_ptr + t[:, None] * K + kk[None, :], mask=km, other=-1, cache_modifier=".cg") - offset
    keys = tl.where(km & (raw >= 0) & (raw < El), raw, -1).to(tl.int32)   # (TS, KW) local expert or -1
    hot = tl.zeros((TS, ELP), dtype=tl.int32)
    for k in range(K):
        hot += (tl.sum(tl.where(kk[None, :] == k, keys, 0), axis=1)[:, None] == e[None, :]).to(tl.int32)
    start = _expert_lists(tl.sum(hot, axis=0), e, e < El, El, act_ptr, start_ptr)
    nxt = tl.cumsum(hot, axis=0) - hot + start[None, :]                   # (TS, ELP): token t's next position of e
    for k in range(K):
        key = tl.sum(tl.where(kk[None, :] == k, keys, 0), axis=1)
        hit = key[:, None] == e[None, :]
        pos = tl.where(key >= 0, tl.sum(tl.where(hit, nxt, 0), axis=1), -1)
        i = t * K + k
        tl.store(sorted_ptr + pos, i, mask=pos >= 0)
        tl.store(inv_ptr + i, pos, mask=t < T)
        nxt += hit.to(tl.int32)


@triton.jit
def _gate_route_kernel(logit_ptr, bias_ptr, tid_ptr, ids_ptr, w_ptr, idx_ptr, x_ptr, xq_ptr, sx_ptr, act_ptr,
                       start_ptr, sorted_ptr, inv_ptr, cnt_ptr, T, E, route_scale, offset, El,
                       D: tl.constexpr, K: tl.constexpr, KP: tl.constexpr, EP: tl.constexpr, HAS_BIAS: tl.constexpr,
                       HASH: tl.constexpr, TOPK: tl.constexpr, ELP: tl.constexpr, CH: tl.constexpr,
                       GB: tl.constexpr, TS: tl.constexpr = 0, KW: tl.constexpr = 2, PDL: tl.constexpr = False):
    # TOPK (moe_layer): programs 0..T-1 are _topk_kernel's (logits (T, E) -> w (T, K) fp32, idx (T, K) int64); each
    #   takes a ticket (cnt: one int32, zero between launches) after its stores, and the last to arrive sorts the
    #   slots (_sort_slots) and resets the ticket. Not TOPK (moe_experts): idx is given, program 0 sorts.
    # The other programs act-quantize x (T, D) bf16 -> xq (T, D) e4m3 codes, sx (T, D/128) fp32, GB groups each.
    # PDL (config UP_EARLY "spec"): every program lets the W1 / W3 launch after it start at once (a PDL launch whose
    # programs wait for this launch's completion before they read anything it writes); this launch itself waits for
    # nothing: it is not launched early.
    pdl_release(PDL)
    pid = tl.program_id(0)
    if TOPK:
        NTOP = T
    else:
        NTOP = 1
    if pid < NTOP:
        if TOPK:
            _topk_row(pid, logit_ptr, bias_ptr, tid_ptr, ids_ptr, w_ptr, idx_ptr, E, route_scale, K, KP, EP,
                      HAS_BIAS, HASH)
            tl.debug_barrier()                                     # every thread's stores before the release
            last = tl.atomic_add(cnt_ptr, 1, sem="acq_rel", scope="gpu") == T - 1
        else:
            last = True
        if last:
            _route_lists(idx_ptr, act_ptr, start_ptr, sorted_ptr, inv_ptr, T, K, offset, El, ELP, CH, TS, KW)
            if TOPK:
                tl.atomic_xchg(cnt_ptr, 0, sem="relaxed", scope="gpu")          # ready for the next launch
    else:
        _quant_x_block(pid - NTOP, x_ptr, xq_ptr, sx_ptr, D, GB)


@triton.jit
def _quant_x_block(q, x_ptr, xq_ptr, sx_ptr, D: tl.constexpr, GB: tl.constexpr):
    """x-quant program q of the routing launches: row q // NXB, GB groups of 128 from (q % NXB) * GB -> e4m3 codes
    xq (T, D) and UE8M0 scales sx (T, D/128) fp32."""
    NG: tl.constexpr = D // 128
    NXB: tl.constexpr = (NG + GB - 1) // GB
    row = (q // NXB).to(tl.int64)
    g = (q % NXB) * GB + tl.arange(0, GB)
    offs = g[:, None] * 128 + tl.arange(0, 128)[None, :]
    gm = g < NG
    v = tl.load(x_ptr + row * D + offs, mask=gm[:, None], other=0.0).to(tl.float32)
    code, sc = _quant_groups(v)
    tl.store(xq_ptr + row * D + offs, code.to(tl.uint8), mask=gm[:, None])
    tl.store(sx_ptr + row * NG + g, sc, mask=gm)


@triton.jit
def _gate_fused_kernel(x_ptr, gw_ptr, logit_ptr, bias_ptr, tid_ptr, ids_ptr, w_ptr, idx_ptr, xq_ptr, sx_ptr, act_ptr,
                       start_ptr, sorted_ptr, inv_ptr, cnt_ptr, T, E, NGP, route_scale, offset, El,
                       D: tl.constexpr, K: tl.constexpr, KP: tl.constexpr, EP: tl.constexpr, HAS_BIAS: tl.constexpr,
                       HASH: tl.constexpr, EB: tl.constexpr, BD: tl.constexpr, TP: tl.constexpr, SORT: tl.constexpr,
                       ELP: tl.constexpr, CH: tl.constexpr, GB: tl.constexpr, PDL: tl.constexpr = False,
                       TS: tl.constexpr = 0, KW: tl.constexpr = 2, SLOTS: tl.constexpr = False,
                       ROWS_ROUTED: tl.constexpr = False, TRACE: tl.constexpr = False, trace_ptr=0,
                       TAIL: tl.constexpr = True):
    # The whole gate of a few tokens (T <= TP) in ONE launch (config GATE "fused"): programs 0..NGP-1 each compute
    # the fp32 logits of EB experts for every token (x (T, D) bf16 . gate weight (E, D) bf16 rows, fp32 products
    # summed in a fixed order: deterministic) into logits (T, E), then take a ticket (cnt: one int32, zero between
    # launches); the last to arrive picks every token's top-k (_topk_rows, all rows at once) -> w, idx, and with SORT
    # groups the slots by local expert (_sort_slots; SLOTS, score routing: from the top-k's places in registers,
    # _route_from_slots) and resets the ticket. Programs NGP.. act-quantize x as _gate_route_kernel's (SORT only).
    # Replaces the gate GEMM + _gate_route_kernel (or + _topk_kernel) launches.
    # ROWS_ROUTED (hash routing, config GATE_ROWS "routed"): NGP = T * K programs, program (t, k) scores only the
    # expert token t's table row names into logits[t * K + k] (the weights are the softmax of those K scores): K
    # gate rows a token instead of all E.
    # TAIL False (config GATE_TAIL "up", one token, score routing): no ticket and no last program: the scoring
    #   programs only store the logits, and each routed program of the W1 / W3 launch after this one takes the top-k
    #   itself (_grouped_gemm_kernel LOCAL).
    # TRACE (kernels/trace.py): marks start, released (after the PDL wait), finish (before the ticket; the
    #   x-quantization programs: their block done) and end; kind 0 a scoring program, 1 an x-quantization one.
    pid = tl.program_id(0)
    trace_mark(trace_ptr, 0, TRACE)
    if pid < NGP and not ROWS_ROUTED:  # PDL: the program's EB gate rows (contiguous) into L2 first, one prefetch
        one = pid + tl.arange(0, 1)                                # (a prefetch per row spilled on sm_90)
        l2_prefetch_rows(gw_ptr, one, one < NGP, EB * 2 * D, 0, tl.minimum(EB, E - pid * EB) * 2 * D, PDL)
    pdl_enter(PDL)
    trace_mark(trace_ptr, 1, TRACE)
    if pid < NGP:
        trace_kind(trace_ptr, 0, TRACE)
        d = tl.arange(0, BD)
        if ROWS_ROUTED:
            t = pid // K
            row = tl.load(tid_ptr + tl.load(ids_ptr + t) * K + pid % K).to(tl.int64)
            acc1 = tl.zeros((BD,), dtype=tl.float32)
            for d0 in tl.static_range(0, D, BD):
                acc1 += tl.load(gw_ptr + row * D + d0 + d).to(tl.float32) * tl.load(x_ptr + t * D + d0 + d).to(
                    tl.float32)
            tl.store(logit_ptr + pid, tl.sum(acc1, axis=0))
        else:
            e = pid * EB + tl.arange(0, EB)
            em = e < E
            for t in range(T):
                acc = tl.zeros((EB, BD), dtype=tl.float32)
                for d0 in tl.static_range(0, D, BD):
                    w = tl.load(gw_ptr + e[:, None].to(tl.int64) * D + d0 + d[None, :], mask=em[:, None], other=0.0)
                    xv = tl.load(x_ptr + t * D + d0 + d)
                    acc += w.to(tl.float32) * xv.to(tl.float32)[None, :]
                tl.store(logit_ptr + t * E + e, tl.sum(acc, axis=1), mask=em)
        tl.debug_barrier()                                         # every thread's stores before the release
        trace_mark(trace_ptr, 2, TRACE)
        if TAIL:
            if tl.atomic_add(cnt_ptr, 1, sem="acq_rel", scope="gpu") == NGP - 1:
                # TRACE steps of the last program: 0 ticket won; score routing: 1 scores, 2 top-k places, 3 weights
                # and ids stored, 4 routing lists stored (hash routing: 3 top-k stored, 4 routing lists stored)
                trace_step(trace_ptr, 0, TRACE)
                if ROWS_ROUTED:
                    _hash_rows_topk(T, logit_ptr, tid_ptr, ids_ptr, w_ptr, idx_ptr, route_scale, K, KP, TP)
                elif HASH:
                    _topk_rows(0, T, logit_ptr, bias_ptr, tid_ptr, ids_ptr, w_ptr, idx_ptr, E, route_scale, K, KP,
                               EP, HAS_BIAS, HASH, TP, True)
                else:          # score routing, its steps marked
                    rows, rm, ids, slot = _score_topk(0, T, logit_ptr, bias_ptr, w_ptr, idx_ptr, E, route_scale, K, EP,
                                                      HAS_BIAS, TP, True, TRACE, trace_ptr)
                trace_step(trace_ptr, 3, TRACE)
                if SLOTS:      # score routing, SORT: the slot sort from the places in registers (_route_from_slots)
                    _route_from_slots(slot, ids, rows, rm, act_ptr, start_ptr, sorted_ptr, inv_ptr, K, offset, El)
                    trace_step(trace_ptr, 4, TRACE)
                elif SORT:
                    tl.debug_barrier()                                 # idx stores of every thread before the sort
                    _route_lists(idx_ptr, act_ptr, start_ptr, sorted_ptr, inv_ptr, T, K, offset, El, ELP, CH, TS, KW)
                    trace_step(trace_ptr, 4, TRACE)
                tl.atomic_xchg(cnt_ptr, 0, sem="relaxed", scope="gpu")              # ready for the next launch
    else:
        trace_kind(trace_ptr, 1, TRACE)
        _quant_x_block(pid - NGP, x_ptr, xq_ptr, sx_ptr, D, GB)
        trace_mark(trace_ptr, 2, TRACE)
    trace_mark(trace_ptr, 3, TRACE)


@triton.jit
def _gate_mma_kernel(x_ptr, gw_ptr, part_ptr, logit_ptr, cid_ptr, bias_ptr, tid_ptr, ids_ptr, w_ptr, idx_ptr, xq_ptr,
                     sx_ptr, act_ptr, start_ptr, sorted_ptr, inv_ptr, cnt_ptr, T, E, NTB, route_scale, offset, El,
                     D: tl.constexpr, K: tl.constexpr, KP: tl.constexpr, EP: tl.constexpr, HAS_BIAS: tl.constexpr,
                     HASH: tl.constexpr, TB: tl.constexpr, EB: tl.constexpr, NEB: tl.constexpr, BD: tl.constexpr,
                     S: tl.constexpr, ELP: tl.constexpr, CH: tl.constexpr, GB: tl.constexpr, TS: tl.constexpr,
                     KW: tl.constexpr, DOT_UPCAST: tl.constexpr, NC: tl.constexpr):
    # The gate of a batch in ONE launch with tensor-core logits (config GATE "mma": no gate GEMM launch before the
    # routing launch). Program (token block tb of TB rows, expert block eb of EB, D split s of S) dots its x rows
    # against its gate rows over D / S (bf16 -> fp32 MMA) into partials (S, T, E) and takes ticket 1 + tb * NEB + eb;
    # the last of the S sums them in split order (deterministic) and, scored, picks each row's top-K of its EB
    # experts: candidates (score, log score, id) (T, NEB x KP) in logits / cid (the top-K of a row is among its
    # blocks' top-Ks; a token block's selection is thus spread over NEB programs instead of one walking TB x E); or,
    # hashed, stores the log scores (T, E). Then it takes ticket 1 + NEB * NTB + tb; the last of a token block's NEB
    # picks its TB rows' top-k from the candidates (hashed: gathers the table's K log scores a row) and takes ticket
    # 0; the last token block sorts the slots (_route_lists). Every ticket is put back to zero by the program that
    # took its last number. Programs NTB * NEB * S.. act-quantize x as _gate_route_kernel's.
    NPG = NTB * NEB * S                                            # NEB = cdiv(E, EB) expert blocks
    pid = tl.program_id(0)
    if pid < NPG:
        tb = pid // (NEB * S)
        eb = (pid // S) % NEB
        s = pid % S
        t = tb * TB + tl.arange(0, TB)
        tm = t < T
        e = eb * EB + tl.arange(0, EB)
        em = e < E
        d = tl.arange(0, BD)
        DS: tl.constexpr = D // S
        acc = tl.zeros((TB, EB), dtype=tl.float32)
        for d0 in range(s * DS, s * DS + DS, BD):
            xv = tl.load(x_ptr + t[:, None] * D + d0 + d[None, :], mask=tm[:, None], other=0.0)
            wv = tl.load(gw_ptr + e[:, None].to(tl.int64) * D + d0 + d[None, :], mask=em[:, None], other=0.0)
            acc = tl.dot(dot_operand(xv, DOT_UPCAST), dot_operand(tl.trans(wv), DOT_UPCAST), acc)
        pm = tm[:, None] & em[None, :]
        tl.store(part_ptr + (s * T + t[:, None]) * E + e[None, :], acc, mask=pm)
        tl.debug_barrier()                                         # every thread's stores before the release
        if tl.atomic_add(cnt_ptr + 1 + tb * NEB + eb, 1, sem="acq_rel", scope="gpu") == S - 1:
            lg = tl.zeros((TB, EB), dtype=tl.float32)
            for j in range(S):                                     # split order, whoever arrived last
                lg += tl.load(part_ptr + (j * T + t[:, None]) * E + e[None, :], mask=pm, other=0.0,
                              cache_modifier=".cg")
            b, ls = _gate_scores(lg, e, em, bias_ptr, HAS_BIAS)
            if HASH:                                               # the log scores; the ids come from the table
                tl.store(logit_ptr + t[:, None] * E + e[None, :], ls, mask=pm)
            else:                                                  # NC: candidate columns a row (NEB x KP, padded)
                slot = _topk_slots(b, e[None, :], K)               # each of the block's top-K to its place
                co = t[:, None] * NC + eb * KP + slot
                cm = tm[:, None] & (slot < K)
                tl.store(logit_ptr + co, b, mask=cm)
                tl.store(logit_ptr + T * NC + co, ls, mask=cm)
                tl.store(cid_ptr + co, tl.broadcast_to(e[None, :], slot.shape), mask=cm)
            tl.atomic_xchg(cnt_ptr + 1 + tb * NEB + eb, 0, sem="relaxed", scope="gpu")
            tl.debug_barrier()
            if tl.atomic_add(cnt_ptr + 1 + NEB * NTB + tb, 1, sem="acq_rel", scope="gpu") == NEB - 1:
                if HASH:
                    kk = tl.arange(0, KP)[None, :]
                    hm = tm[:, None] & (kk < K)
                    tok = tl.load(ids_ptr + t, mask=tm, other=0)
                    iv = tl.load(tid_ptr + tok[:, None] * K + kk, mask=hm, other=0)
                    wv = tl.load(logit_ptr + t[:, None] * E + iv, mask=hm, other=float("-inf"), cache_modifier=".cg")
                    _store_topk(wv, iv, t, tm, w_ptr, idx_ptr, route_scale, K, KP)
                else:
                    rc = tl.arange(0, NC)[None, :]                 # the token block's rows of candidates
                    ro = t[:, None] * NC + rc
                    rm = tm[:, None] & (rc < NEB * KP) & (rc % KP < K)     # places K..KP-1 of a block: unwritten
                    rb = tl.load(logit_ptr + ro, mask=rm, other=float("-inf"), cache_modifier=".cg")
                    rl = tl.load(logit_ptr + T * NC + ro, mask=rm, other=float("-inf"), cache_modifier=".cg")
                    ri = tl.load(cid_ptr + ro, mask=rm, other=NEB * EB + rc, cache_modifier=".cg")  # distinct ids
                    _store_topk_slots(rl, ri, _topk_slots(rb, ri, K), t, tm, w_ptr, idx_ptr, route_scale, K)
                tl.atomic_xchg(cnt_ptr + 1 + NEB * NTB + tb, 0, sem="relaxed", scope="gpu")
                tl.debug_barrier()                                 # idx stores of every thread before the release
                if tl.atomic_add(cnt_ptr, 1, sem="acq_rel", scope="gpu") == NTB - 1:
                    _route_lists(idx_ptr, act_ptr, start_ptr, sorted_ptr, inv_ptr, T, K, offset, El, ELP, CH, TS,
                                 KW)
                    tl.atomic_xchg(cnt_ptr, 0, sem="relaxed", scope="gpu")
    else:
        _quant_x_block(pid - NPG, x_ptr, xq_ptr, sx_ptr, D, GB)


@triton.jit
def _routed_tiles(e, start, end, lrw, in_ptr, sin_ptr, sorted_ptr, wa_ptr, sa_ptr, wb_ptr, sb_ptr, part_ptr, rw_ptr,
                  aq_ptr, sq_ptr, limit, T, ROWS, s, n0, rn, N: tl.constexpr, KD: tl.constexpr, K: tl.constexpr,
                  BM: tl.constexpr, BN: tl.constexpr, KBS: tl.constexpr, LDP: tl.constexpr, ASM: tl.constexpr,
                  PAIR: tl.constexpr, GATED: tl.constexpr, PF: tl.constexpr, SWIGLU: tl.constexpr,
                  RNE_FIX: tl.constexpr, ITEMS: tl.constexpr, LOCAL: tl.constexpr):
    """One routed work item of _grouped_gemm_kernel: expert e's (BN-row tile at n0, K split s) GEMM over the item's
    rows start .. end - 1 (positions in the sorted slots) into the fp32 partials (or, SWIGLU, the W2 input). LOCAL:
    the rows are the one token's (token 0) and lrw is their routing weight (from the program's own top-k)."""
    wa = wa_ptr + e * (N * (KD // 2))
    wb = wb_ptr + e * (N * (KD // 2))
    sa = sa_ptr + e * (N * (KD // 32))
    sb = sb_ptr + e * (N * (KD // 32))
    c = start
    while c < end:
        pos = c + tl.arange(0, BM)
        pm = pos < end
        if GATED and LOCAL:     # one token: token 0
            src = tl.zeros((BM,), dtype=tl.int32)
        elif GATED and ITEMS:   # the token of each slot (T = 1: token 0, no load)
            src = tl.load(sorted_ptr + pos, mask=pm & (T > 1), other=0) // K
        elif GATED:
            src = tl.load(sorted_ptr + pos, mask=pm, other=0) // K          # token of each slot
        else:
            src = pos
        acca = tl.zeros((BN, BM), dtype=tl.float32)
        accb = tl.zeros((BN, BM), dtype=tl.float32)
        if PAIR and PF:     # scale words and x scales of the next K block loaded one block ahead
            # PF 3 (BDIAG): accumulators (BN, 2 BM) over the rows taken twice (bdiag_x), halves folded at the end
            RW: tl.constexpr = 2 * BM if PF == 3 else BM
            if PF == 3:
                r2 = tl.arange(0, RW) % BM
                pmw = c + r2 < end
                if GATED and LOCAL:
                    srcw = tl.zeros((RW,), dtype=tl.int32)
                elif GATED:
                    srcw = tl.load(sorted_ptr + c + r2, mask=pmw, other=0) // K
                else:
                    srcw = c + r2
            else:
                pmw, srcw = pm, src
            accaw = tl.zeros((BN, RW), dtype=tl.float32)
            accbw = tl.zeros((BN, RW), dtype=tl.float32)
            kb0 = s * KBS
            sxrow = sin_ptr + srcw.to(tl.int64) * (KD // 128)
            swa = scale_word(sa, rn, KD // 32, kb0)
            swb = scale_word(sb, rn, KD // 32, kb0) if GATED else swa
            sxv = tl.load(sxrow + kb0, mask=pmw, other=0.0)
            for i in range(KBS):
                kb = kb0 + i
                kn = kb0 + tl.minimum(i + 1, KBS - 1)
                swa_n = scale_word(sa, rn, KD // 32, kn)
                swb_n = scale_word(sb, rn, KD // 32, kn) if GATED else swa_n
                sxv_n = tl.load(sxrow + kn, mask=pmw, other=0.0)
                if PF == 3:
                    xlo, xhi = bdiag_x(in_ptr, srcw, pmw, KD, kb, BM)
                    accaw = fp4_pair_dot_bd(accaw, wa, swa, sxv, rn, KD // 2, kb, xlo, xhi, ASM, BM)
                    if GATED:
                        accbw = fp4_pair_dot_bd(accbw, wb, swb, sxv, rn, KD // 2, kb, xlo, xhi, ASM, BM)
                elif GATED and PF == 2:     # X_ONCE: each x tile loaded once for W1 and W3
                    accaw, accbw = fp4_pair_dot_w2(accaw, accbw, wa, wb, swa, swb, sxv, rn, KD // 2, kb,
                                                   in_ptr, srcw, pmw, KD, ASM)
                else:
                    accaw = fp4_pair_dot_w(accaw, wa, swa, sxv, rn, KD // 2, kb, in_ptr, srcw, pmw, KD, ASM)
                    if GATED:
                        accbw = fp4_pair_dot_w(accbw, wb, swb, sxv, rn, KD // 2, kb, in_ptr, srcw, pmw, KD,
                                               ASM)
                swa, swb, sxv = swa_n, swb_n, sxv_n
            if PF == 3:
                acca = fold_halves(accaw, BN, BM)
                accb = fold_halves(accbw, BN, BM)
            else:
                acca, accb = accaw, accbw
        for i in range(0 if PAIR and PF else KBS):
            kb = s * KBS + i
            if PAIR:
                acca = fp4_pair_dot(acca, wa, sa, rn, KD // 2, KD // 32, kb, in_ptr, sin_ptr, src, pm, KD, ASM)
                if GATED:
                    accb = fp4_pair_dot(accb, wb, sb, rn, KD // 2, KD // 32, kb, in_ptr, sin_ptr, src, pm, KD,
                                        ASM)
            else:
                acca = fp4_tile_dot_fp8(acca, wa, sa, rn, KD // 2, KD // 32, kb, in_ptr, sin_ptr, src, pm, KD,
                                        ASM)
                if GATED:
                    accb = fp4_tile_dot_fp8(accb, wb, sb, rn, KD // 2, KD // 32, kb, in_ptr, sin_ptr, src, pm,
                                            KD, ASM)
        if SWIGLU:
            if LOCAL:   # the item's weight from its own top-k
                rw = tl.where(pm, lrw, 0.0)
            else:
                rw = tl.load(rw_ptr + tl.load(sorted_ptr + pos, mask=pm, other=0), mask=pm, other=0.0)
            _store_swiglu(aq_ptr, sq_ptr, pos, pm, n0, acca, accb, rw, limit, N, BN, RNE_FIX)
        else:
            _store_partial(part_ptr, s, ROWS, pos, pm, rn, acca, accb, N, LDP, GATED)
        c += BM


@triton.jit
def _grouped_gemm_kernel(in_ptr, sin_ptr, act_ptr, start_ptr, sorted_ptr, wa_ptr, sa_ptr, wb_ptr, sb_ptr, part_ptr,
                         hwa_ptr, hsa_ptr, hwb_ptr, hsb_ptr, T, TK, ROWS, NSH, rw_ptr, aq_ptr, sq_ptr, limit,
                         N: tl.constexpr, KD: tl.constexpr, K: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr,
                         SPLIT: tl.constexpr, ASM: tl.constexpr, PAIR: tl.constexpr, SHARED: tl.constexpr,
                         GATED: tl.constexpr, PF: tl.constexpr = 0, SWIGLU: tl.constexpr = False,
                         RNE_FIX: tl.constexpr = False, cnt_ptr=0, fin_ptr=0, inv_ptr=0, extra_ptr=0,
                         FIN: tl.constexpr = False, HAS_EXTRA: tl.constexpr = False, OUT_BF16: tl.constexpr = False,
                         FR: tl.constexpr = 8, FT: tl.constexpr = 32, ITEMS: tl.constexpr = False, it0=0,
                         BMS: tl.constexpr = 16, PDL: tl.constexpr = False, NS=0, XOWN: tl.constexpr = False,
                         xr_ptr=0, SH_AHEAD: tl.constexpr = False, SPEC: tl.constexpr = False, spec_n=0,
                         PROMOTE: tl.constexpr = 0, TRACE: tl.constexpr = False, trace_ptr=0,
                         LOCAL: tl.constexpr = False, logit_ptr=0, bias_ptr=0, idx_ptr=0, E=0, route_scale=1.0,
                         offset=0, El=0, EP: tl.constexpr = 2, HAS_BIAS: tl.constexpr = False,
                         LIVE: tl.constexpr = False):
    # FIN (glue v4): the launch's last programs finish its output, after the GEMM (_grouped_finish: the SwiGLU-quant
    #   epilogue after W1/W3 into aq / sq, the combine after W2 into fin), so neither needs a launch of its own.
    # One program per (work item, N tile, K split); an (N, KD) weight per expert, fp32 partials (SPLIT, ROWS, LDP).
    # GATED, the W1/W3 step: wa = W1, wb = W3 (El, F, D/2) (official, or PAIR64 with PAIR), sa / sb (El, F, D/32)
    #   e8m0; the input is the act-quantized x (T, D) e4m3 + sin (T, D/128) fp32, read by token (sorted slot // K);
    #   partial rows are g | u (LDP = 2F).
    # not GATED, the W2 step: wa = W2 (El, D, F/2), sa (El, D, F/32) (wb, sb unused); the input is the SwiGLU output
    #   aq (ROWS, F) e4m3 + sin (ROWS, F/128) by row; LDP = D.
    # SHARED: items 0 .. NSH-1 are the FP8 shared expert on all T tokens (item j: token tiles j, j + NSH, ..:
    #   NSH = cdiv(T, BM) gives each program one tile, NSH = 1 one program all of them), into partial rows TK + t;
    #   first in the grid, so their K walks do not form the tail. Its inner dimension is NS <= F (a multiple of 128;
    #   a TP rank's slice of the replicated shared expert: kernelbench/decoder/model.py MoE): GATED, hwa / hwb
    #   (NS, KD) e4m3 + (NS/128, KD/128) e8m0, the F tiles from NS on idle; not GATED, hwa (N, NS) + (N/128, NS/128),
    #   the K splits past NS store zero partials. Routed items follow: item NSH + i = the i-th active local expert
    #   (act), an exit when past the count.
    # XOWN (GATED, SHARED; config SHARED_X "own", the default under PDL after a score gate): the shared items
    #   act-quantize their x blocks themselves (x_tile_own from xr = x (T, D) bf16, the routing launch's
    #   arithmetic) and do not wait for the routing launch before them (pdl_release): under PDL this launch starts
    #   once that launch's programs have passed their own wait, so every kernel before it has completed, and the
    #   shared items read only x and weights and write only this call's new partials, activations and tickets (cnt:
    #   a range the routing launch does not use). They stream the shared expert's W1 / W3 beside the gate; the
    #   routed items wait for its routing lists.
    # SH_AHEAD (SHARED; config SHARED_SCALES "ahead"): the shared items load their weights' scale bytes a K block
    #   ahead (else in the block's step: sm_90 SASS, two plain byte loads a step in the gated loop, each waited on at
    #   its scale multiply). The same values in the same order: the same result.
    # SPEC (GATED, PDL; config UP_EARLY "spec", above one token): the launch starts beside the routing launch before
    #   it (which lets it start at once) and each routed item, before its wait, brings into L2 its split's span of
    #   W1 / W3 for the expert it takes when every local expert is active (item i: local expert i), in the first
    #   spec_n programs only (the ones resident while the routing launch runs). A guess: it reads nothing the routing
    #   launch writes, and a wrong one costs only the bytes. (Every program guessing, session 40 call 2 on an H100:
    #   moe_routed 80 -> 124 us at 16 tokens, 168 -> 205 at 64: the inactive experts' spans doubled the bytes.)
    # TRACE (kernels/trace.py): marks start, released (after the wait or the release), finish (the item's GEMM
    #   done, before FIN's ticket) and end; kind 0 a shared-expert item, 1 a routed item with work, 2 one past the
    #   active count.
    # LOCAL (GATED, one token, score routing; config GATE_TAIL "up"): the gate launch before stored only the logits
    #   (_gate_fused_kernel TAIL False); each routed program takes the top-k itself (_local_topk) after its wait, in
    #   parallel, instead of reading the routing lists of the gate's last program (its ticket, top-k and slot sort
    #   in series on the critical path). The grid has ONE routed program set (the host's up_programs), which runs
    #   the token's chosen local experts in turn, each finished by FIN before the next (a set a possible item,
    #   session 48: the sets without an item took the top-k too and ended last; H100, session 49). The first routed
    #   program stores w, idx and the routing lists for W2; FIN takes the item's row and weight from registers
    #   (rw_ptr / act / start / sorted are not yet written).
    NT: tl.constexpr = N // BN
    KBS: tl.constexpr = KD // 128 // SPLIT
    LDP: tl.constexpr = 2 * N if GATED else N
    pid = tl.program_id(0)
    trace_mark(trace_ptr, 0, TRACE)
    a = pid // (NT * SPLIT)
    s = pid % SPLIT
    n0 = ((pid // SPLIT) % NT) * BN
    rn = n0 + tl.arange(0, BN)
    if PDL and SHARED and a < NSH:      # PDL: the shared expert's weight span (the routed ones wait for the gate)
        if GATED:
            if n0 < NS:
                l2_prefetch_rows(hwa_ptr, rn, rn < NS, KD, s * KBS * 128, KBS * 128, PDL)
                l2_prefetch_rows(hwb_ptr, rn, rn < NS, KD, s * KBS * 128, KBS * 128, PDL)
        elif s * KBS * 128 < NS:
            l2_prefetch_rows(hwa_ptr, rn, rn < N, NS, s * KBS * 128, tl.minimum(KBS * 128, NS - s * KBS * 128), PDL)
    if SPEC and GATED and a >= NSH and pid < spec_n:
        guess = (a - NSH).to(tl.int64) * (N * (KD // 2))      # the item's expert if every local one is active
        l2_prefetch_rows(wa_ptr + guess, rn, rn < N, KD // 2, s * KBS * 64, KBS * 64, PDL)
        l2_prefetch_rows(wb_ptr + guess, rn, rn < N, KD // 2, s * KBS * 64, KBS * 64, PDL)
    if XOWN and a < NSH:       # the shared items touch nothing the routing launch writes (above): no wait
        pdl_release(PDL)
    else:
        pdl_enter(PDL)
    trace_mark(trace_ptr, 1, TRACE)
    if SHARED and a < NSH:     # BMS tokens per tile (config BM_SHARED; the routed items take BM slots)
        trace_kind(trace_ptr, 0, TRACE)
        c = a * BMS
        if GATED:              # W1 / W3: the rows NS.. do not exist; the whole K range
            ldw = KD
            nkb = KBS
            if n0 >= NS:
                c = T
        else:                  # W2: rows of NS values; this split's K blocks below NS
            ldw = NS
            nkb = tl.minimum(KBS, tl.maximum(NS // 128 - s * KBS, 0))
        while c < T:
            tok = c + tl.arange(0, BMS)
            pm = tok < T
            src = tok if GATED else TK + tok                 # x rows by token, SwiGLU rows TK + t
            acca = tl.zeros((BN, BMS), dtype=tl.float32)
            accb = tl.zeros((BN, BMS), dtype=tl.float32)
            if SH_AHEAD:       # the scale rows of this N tile, and their first K block's bytes
                srow = (n0 // 128) * (ldw // 128) + s * KBS
                swa = tl.load(hsa_ptr + srow, mask=nkb > 0, other=127)
                if GATED:
                    swb = tl.load(hsb_ptr + srow, mask=nkb > 0, other=127)
            for i in range(nkb):
                kb = s * KBS + i
                if XOWN:
                    xq, sxq = x_tile_own(xr_ptr, src, pm, kb, KD)
                else:
                    xq, sxq = x_tile(in_ptr, sin_ptr, src, pm, kb, KD)
                if SH_AHEAD:
                    more = i + 1 < nkb
                    swa_n = tl.load(hsa_ptr + srow + i + 1, mask=more, other=127)
                    acca = fp8_tile_dot(acca, hwa_ptr, hsa_ptr, n0, rn, ldw, kb, xq, sxq, swa, PROMOTE)
                    swa = swa_n
                    if GATED:
                        swb_n = tl.load(hsb_ptr + srow + i + 1, mask=more, other=127)
                        accb = fp8_tile_dot(accb, hwb_ptr, hsb_ptr, n0, rn, ldw, kb, xq, sxq, swb, PROMOTE)
                        swb = swb_n
                else:
                    acca = fp8_tile_dot(acca, hwa_ptr, hsa_ptr, n0, rn, ldw, kb, xq, sxq, None, PROMOTE)
                    if GATED:
                        accb = fp8_tile_dot(accb, hwb_ptr, hsb_ptr, n0, rn, ldw, kb, xq, sxq, None, PROMOTE)
            if SWIGLU:
                _store_swiglu(aq_ptr, sq_ptr, TK + tok, pm, n0, acca, accb, tl.full((BMS,), 1.0, tl.float32), limit,
                              N, BN, RNE_FIX)
            else:
                _store_partial(part_ptr, s, ROWS, TK + tok, pm, rn, acca, accb, N, LDP, GATED)
            c += NSH * BMS
    else:
        if LOCAL:       # one token: the top-k here, then the token's chosen local experts one after another
            chosen, el, nw, n_local = _local_topk(pid == NSH * NT * SPLIT, logit_ptr, bias_ptr, rw_ptr, idx_ptr,
                                                  act_ptr, start_ptr, sorted_ptr, inv_ptr, E, route_scale, offset, El,
                                                  K, EP, HAS_BIAS)
            trace_step(trace_ptr, 0, TRACE)       # TRACE step 0: its top-k done (after the reductions' barriers)
            trace_kind(trace_ptr, 2, TRACE)
            if n_local > 0:
                trace_kind(trace_ptr, 1, TRACE)
            for j in range(n_local):    # item j: the j-th chosen local expert, slot row j, weight from registers
                e, lrw = _local_pick(j, chosen, el, nw)
                _routed_tiles(e.to(tl.int64), j, j + 1, lrw, in_ptr, sin_ptr, sorted_ptr, wa_ptr, sa_ptr, wb_ptr,
                              sb_ptr, part_ptr, rw_ptr, aq_ptr, sq_ptr, limit, T, ROWS, s, n0, rn, N, KD, K, BM, BN,
                              KBS, LDP, ASM, PAIR, GATED, PF, SWIGLU, RNE_FIX, ITEMS, LOCAL)
                if FIN:     # item j's ticket (work item NSH + j) and its SwiGLU-quant, before the next item
                    _grouped_finish(part_ptr, act_ptr, start_ptr, sorted_ptr, cnt_ptr, rw_ptr, aq_ptr, sq_ptr,
                                    inv_ptr, extra_ptr, limit, T, TK, ROWS, NSH, N, K, BMS, BN, SPLIT, SHARED, GATED,
                                    HAS_EXTRA, OUT_BF16, RNE_FIX, FR, FT, ITEMS, it0, NS, LOCAL, j + 1, lrw,
                                    NSH + j if SHARED else j, TRACE, trace_ptr)
        else:
            item = a - NSH if SHARED else a
            if ITEMS:   # the item's (expert, start, end) from one table row: one round trip; empty rows: end = start
                live = True
                tb = act_ptr + it0 + 4 * item
                e = tl.load(tb).to(tl.int64)
                start = tl.load(tb + 1)
                end = tl.load(tb + 2)
            else:
                live = item < tl.load(act_ptr)
            trace_kind(trace_ptr, 2, TRACE)
            if live:
                trace_kind(trace_ptr, 1, TRACE)
                if not ITEMS:   # the count (above), then the expert, then its offsets: three round trips
                    e = tl.load(act_ptr + 1 + item).to(tl.int64)
                    start = tl.load(start_ptr + e)
                    end = tl.load(start_ptr + e + 1)
                _routed_tiles(e, start, end, 1.0, in_ptr, sin_ptr, sorted_ptr, wa_ptr, sa_ptr, wb_ptr, sb_ptr,
                              part_ptr, rw_ptr, aq_ptr, sq_ptr, limit, T, ROWS, s, n0, rn, N, KD, K, BM, BN, KBS, LDP,
                              ASM, PAIR, GATED, PF, SWIGLU, RNE_FIX, ITEMS, LOCAL)
    trace_mark(trace_ptr, 2, TRACE)
    if FIN:
        finish = True
        if LOCAL:       # the routed items finished in their loop above; the shared ones here
            finish = a < NSH
        if finish:
            _grouped_finish(part_ptr, act_ptr, start_ptr, sorted_ptr, cnt_ptr, rw_ptr, aq_ptr if GATED else fin_ptr,
                            sq_ptr, inv_ptr, extra_ptr, limit, T, TK, ROWS, NSH, N, K, BMS, BN, SPLIT, SHARED, GATED,
                            HAS_EXTRA, OUT_BF16, RNE_FIX, FR, FT, ITEMS, it0, NS, LOCAL, 0, 1.0, a, TRACE, trace_ptr,
                            LIVE)
    trace_mark(trace_ptr, 3, TRACE)


@triton.jit
def _item_rows(a, act_ptr, start_ptr, T, TK, NSH, BM: tl.constexpr, SHARED: tl.constexpr, ITEMS: tl.constexpr, it0,
               LOCAL: tl.constexpr, lend):
    """Work item a's rows of the partial / activation buffers -> (lo, hi): a routed item's slots by sorted position
    (the i-th active local expert's start .. end; LOCAL: the one row a, to lend); with SHARED, items 0..NSH-1 the
    shared expert's rows TK + t for its token tiles a, a + NSH, ..: all T tokens when NSH = 1, tile a alone when
    NSH = cdiv(T, BM) (SHARED_ITEMS "one" / "per_tile"). An item past the active count: lo = hi."""
    item = a - NSH if SHARED else a
    if LOCAL:
        lo = item
        hi = tl.where(item >= 0, lend, item)
    elif ITEMS:
        ok = item >= 0
        lo = tl.load(act_ptr + it0 + 4 * item + 1, mask=ok, other=0)
        hi = tl.load(act_ptr + it0 + 4 * item + 2, mask=ok, other=0)
    else:
        ok = (item >= 0) & (item < tl.load(act_ptr, mask=item >= 0, other=0))   # shared items: no read
        e = tl.load(act_ptr + 1 + item, mask=ok, other=0)
        lo = tl.load(start_ptr + e, mask=ok, other=0)
        hi = tl.load(start_ptr + e + 1, mask=ok, other=0)
    if SHARED:
        lo = tl.where(a < NSH, TK + a * BM, lo)
        hi = tl.where(a < NSH, TK + tl.where(NSH == 1, T, tl.minimum(T, a * BM + BM)), hi)
    return lo, hi


@triton.jit
def _grouped_finish(part_ptr, act_ptr, start_ptr, sorted_ptr, cnt_ptr, rw_ptr, fin_ptr, sfin_ptr, inv_ptr, extra_ptr,
                    limit, T, TK, ROWS, NSH, N: tl.constexpr, K: tl.constexpr, BM: tl.constexpr,
                    BN: tl.constexpr, SPLIT: tl.constexpr, SHARED: tl.constexpr, GATED: tl.constexpr,
                    HAS_EXTRA: tl.constexpr, OUT_BF16: tl.constexpr, RNE_FIX: tl.constexpr, FR: tl.constexpr = 8,
                    FT: tl.constexpr = 32, ITEMS: tl.constexpr = False, it0=0, NS=0, LOCAL: tl.constexpr = False,
                    lend=0, lrw=1.0, ag=0, TRACE: tl.constexpr = False, trace_ptr=0, LIVE: tl.constexpr = False):
    """The end of a _grouped_gemm_kernel program with FIN: store -> ticket (cnt: int32s, zero between launches, reset
    by the program that takes the last one) -> the last arrival finishes, summing the partials in split order
    (deterministic, the same arithmetic as the separate launches).
    GATED: one ticket per (work item a, 128-column group of F), taken by its (128 / BN) * SPLIT programs; the last
      runs the SwiGLU-quant of the item's rows for that group (_swiglu_quant_block) into fin = aq, sfin = sq.
      LOCAL (GATE_TAIL "up"): the work item is ag (a program runs the one token's routed items in turn, each
      finished before the next); a routed item's rows are item .. lend - 1 and its weight lrw, from the program's own
      top-k (the lists in memory are not yet written).
    Block sizes (8 rows here, 32 tokens below): spill-free on sm_120 at Flash sizes (16 / 32 rows spilled 16-24 B).
    not GATED: one ticket per N tile; the last program to take it runs the combine of all T tokens for its BN
      columns (_combine_block) into fin (out). LIVE (config COMBINE_TICKETS "live", the default): only the programs
      of items with work take it, the shared items and the act[0] active routed ones (at least item 0's, so that a
      call with none still combines), so the combine need not wait until the idle items' programs (the grid's worst
      case) have been scheduled; "all": every program of the tile (inactive items too: they exit the GEMM at once).
    TRACE (kernels/trace.py): the program that finishes marks sub-step 1 when it wins the ticket and 2 when its
      block is stored (step 0 is the LOCAL top-k's)."""
    tl.debug_barrier()                                    # every thread's partial stores before the release
    NT: tl.constexpr = N // BN
    pid = tl.program_id(0)                                # (work item a, N tile, K split) as in the GEMM
    if LOCAL:
        a = ag
    else:
        a = pid // (NT * SPLIT)
    n0 = ((pid // SPLIT) % NT) * BN
    if GATED:
        NGRP: tl.constexpr = N // 128
        lo, hi = _item_rows(a, act_ptr, start_ptr, T, TK, NSH, BM, SHARED, ITEMS, it0, LOCAL, lend)
        if SHARED:
            hi = tl.where((a < NSH) & (n0 >= NS), lo, hi)     # the shared expert's F tiles from NS on are idle
        if hi > lo:
            ticket = cnt_ptr + a * NGRP + n0 // 128
            if tl.atomic_add(ticket, 1, sem="acq_rel", scope="gpu") == (128 // BN) * SPLIT - 1:
                trace_step(trace_ptr, 1, TRACE)
                for r0 in range(lo, hi, FR):                  # FR rows x 128 columns at a time
                    rows = r0 + tl.arange(0, FR)
                    _swiglu_quant_block(part_ptr, rw_ptr, sorted_ptr, fin_ptr, sfin_ptr, rows, rows < hi, n0 // 128,
                                        TK, ROWS, limit, N, SPLIT, RNE_FIX, LOCAL, lrw)
                trace_step(trace_ptr, 2, TRACE)
                tl.atomic_xchg(ticket, 0, sem="relaxed", scope="gpu")
    else:
        ticket = cnt_ptr + n0 // BN
        arrive = True
        if LIVE:                                              # the items with work: a < NSH + act[0] (after the wait)
            live = tl.maximum(NSH + tl.load(act_ptr), 1)
            arrive = a < live
        if arrive:
            got = tl.atomic_add(ticket, 1, sem="acq_rel", scope="gpu")
            if LIVE:
                last = got == live * SPLIT - 1                # their SPLIT programs each
            else:
                last = got == tl.num_programs(0) // NT - 1   # every item's SPLIT programs of this N tile
            if last:
                trace_step(trace_ptr, 1, TRACE)
                cols = n0 + tl.arange(0, BN)
                for t0 in range(0, T, FT):                    # FT tokens x BN columns at a time
                    toks = t0 + tl.arange(0, FT)
                    _combine_block(part_ptr, inv_ptr, extra_ptr, fin_ptr, toks, toks < T, cols, TK, ROWS, N, K,
                                   SPLIT, HAS_EXTRA, SHARED, OUT_BF16, RNE_FIX)
                trace_step(trace_ptr, 2, TRACE)
                tl.atomic_xchg(ticket, 0, sem="relaxed", scope="gpu")


@triton.jit
def _swiglu_quant_block(part_ptr, rw_ptr, sorted_ptr, aq_ptr, sa_ptr, rows, rm, grp, TK, ROWS, limit,
                        F: tl.constexpr, SPLIT: tl.constexpr, RNE_FIX: tl.constexpr, GIVEN: tl.constexpr = False,
                        rw_given=1.0):
    """_swiglu_quant_kernel's arithmetic for rows (BR,) (positions; rows >= TK: the shared expert, weight 1) and one
    128-column group grp: (SPLIT, ROWS, 2F) fp32 partials -> aq (ROWS, F) e4m3 codes, sa (ROWS, F/128) fp32.
    GIVEN: the routed rows' weight is rw_given (one routed row: GATE_TAIL "up"), not rw[sorted[row]]."""
    offs = grp * 128 + tl.arange(0, 128)
    p64 = rows.to(tl.int64)
    m = rm[:, None]
    g = tl.zeros((rows.shape[0], 128), dtype=tl.float32)
    u = tl.zeros((rows.shape[0], 128), dtype=tl.float32)
    for s in tl.static_range(SPLIT):                                       # fixed order: deterministic
        row = part_ptr + (s * ROWS + p64)[:, None] * (2 * F) + offs[None, :]
        g += tl.load(row, mask=m, other=0.0, cache_modifier=".cg")
        u += tl.load(row + F, mask=m, other=0.0, cache_modifier=".cg")
    g = to_bf16(g, RNE_FIX).to(tl.float32)                                # the expert GEMMs return bf16
    u = to_bf16(u, RNE_FIX).to(tl.float32)
    u = tl.minimum(tl.maximum(u, -limit), limit)
    g = tl.minimum(g, limit)
    routed = rm & (rows < TK)
    if GIVEN:
        rw = tl.where(routed, rw_given, 1.0)
    else:
        rw = tl.load(rw_ptr + tl.load(sorted_ptr + rows, mask=routed, other=0), mask=routed, other=1.0)
    act = to_bf16(g / (1.0 + tl.exp(-g)) * u * rw[:, None], RNE_FIX).to(tl.float32)
    code, sc = _quant_groups(act)
    tl.store(aq_ptr + p64[:, None] * F + offs[None, :], code.to(tl.uint8), mask=m)
    tl.store(sa_ptr + p64 * (F // 128) + grp, sc, mask=rm)


@triton.jit
def _combine_block(part_ptr, inv_ptr, shared_ptr, out_ptr, toks, tm, cols, TK, ROWS, D: tl.constexpr, K: tl.constexpr,
                   SPLIT: tl.constexpr, HAS_SHARED: tl.constexpr, SHARED_ROWS: tl.constexpr, OUT_BF16: tl.constexpr,
                   RNE_FIX: tl.constexpr):
    """_grouped_combine_kernel's arithmetic for tokens toks (BR,) x columns cols (BN,): per k in order bf16(sum of the
    SPLIT partials at the slot's position) (+ bf16 of the shared expert's rows TK + t) (+ shared (T, D) bf16)."""
    acc = tl.zeros((toks.shape[0], cols.shape[0]), dtype=tl.float32)
    t64 = toks.to(tl.int64)
    for k in tl.static_range(K):
        p = tl.load(inv_ptr + t64 * K + k, mask=tm, other=-1)
        m = (p >= 0)[:, None]
        y = tl.zeros(acc.shape, dtype=tl.float32)
        for s in tl.static_range(SPLIT):
            y += tl.load(part_ptr + (s * ROWS + p).to(tl.int64)[:, None] * D + cols[None, :], mask=m, other=0.0,
                         cache_modifier=".cg")
        acc += to_bf16(y, RNE_FIX).to(tl.float32)                        # each expert's output is bf16
    if SHARED_ROWS:
        y = tl.zeros(acc.shape, dtype=tl.float32)
        for s in tl.static_range(SPLIT):
            y += tl.load(part_ptr + (s * ROWS + TK + t64)[:, None] * D + cols[None, :], mask=tm[:, None], other=0.0,
                         cache_modifier=".cg")
        acc += to_bf16(y, RNE_FIX).to(tl.float32)                        # shared_expert returns bf16
    if HAS_SHARED:
        acc += tl.load(shared_ptr + t64[:, None] * D + cols[None, :], mask=tm[:, None], other=0.0).to(tl.float32)
    if OUT_BF16:
        tl.store(out_ptr + t64[:, None] * D + cols[None, :], to_bf16(acc, RNE_FIX), mask=tm[:, None])
    else:
        tl.store(out_ptr + t64[:, None] * D + cols[None, :], acc, mask=tm[:, None])


@triton.jit
def _store_swiglu(aq_ptr, sq_ptr, rows, pm, n0, accg, accu, rw, limit, F: tl.constexpr, BN: tl.constexpr,
                  RNE_FIX: tl.constexpr):
    """The W1/W3 tiles of a program that walked all of K (no split) and covers whole act-quant groups (BN = 128):
    the arithmetic of _swiglu_quant_kernel on (BN, BM) -> aq (ROWS, F) e4m3 codes, sq (ROWS, F/128) fp32."""
    g = to_bf16(accg, RNE_FIX).to(tl.float32)                            # the expert GEMMs return bf16
    u = to_bf16(accu, RNE_FIX).to(tl.float32)
    u = tl.minimum(tl.maximum(u, -limit), limit)
    g = tl.minimum(g, limit)
    act = to_bf16(g / (1.0 + tl.exp(-g)) * u * rw[None, :], RNE_FIX).to(tl.float32)
    code, sc = _quant_groups(tl.trans(act))                              # (BM, 128), (BM,)
    r64 = rows.to(tl.int64)
    tl.store(aq_ptr + r64[:, None] * F + n0 + tl.arange(0, BN)[None, :], code.to(tl.uint8), mask=pm[:, None])
    tl.store(sq_ptr + r64 * (F // 128) + n0 // 128, sc, mask=pm)


@triton.jit
def _store_partial(part_ptr, s, ROWS, rows, pm, rn, acca, accb, N: tl.constexpr, LDP: tl.constexpr,
                   GATED: tl.constexpr):
    """acca (BN, BM) -> partial rows `rows` of split s, columns rn (and accb at columns N + rn when GATED)."""
    out = part_ptr + (s * ROWS + rows[None, :]).to(tl.int64) * LDP + rn[:, None]
    tl.store(out, acca, mask=pm[None, :])
    if GATED:
        tl.store(out + N, accb, mask=pm[None, :])


@triton.jit
def _swiglu_quant_kernel(part_ptr, rw_ptr, sorted_ptr, start_ptr, aq_ptr, sa_ptr, TK, ROWS, El, limit,
                         F: tl.constexpr, SPLIT: tl.constexpr, GB: tl.constexpr, GPP: tl.constexpr,
                         RNE_FIX: tl.constexpr):
    # part (SPLIT, ROWS, 2F) fp32; rw (TK,) fp32 by slot -> aq (ROWS, F) e4m3 codes, sa (ROWS, F/128) fp32 by row;
    # rows: the local slots by position, then (rows TK.., when the shared expert is fused) one per token, weight 1.
    # Grid (ROWS, F / 128 / GPP): program (p, q) does row p's 128-groups q * GPP .. + GPP - 1, GB at a time
    p = tl.program_id(0)
    if (p < tl.load(start_ptr + El)) | (p >= TK):
        rw = tl.load(rw_ptr + tl.load(sorted_ptr + p, mask=p < TK, other=0), mask=p < TK, other=1.0)
        NG: tl.constexpr = F // 128
        p64 = p.to(tl.int64)
        for g0 in range(tl.program_id(1) * GPP, tl.program_id(1) * GPP + GPP, GB):
            gi = g0 + tl.arange(0, GB)
            offs = gi[:, None] * 128 + tl.arange(0, 128)[None, :]
            gm = (gi < NG)[:, None]
            g = tl.zeros((GB, 128), dtype=tl.float32)
            u = tl.zeros((GB, 128), dtype=tl.float32)
            for s in tl.static_range(SPLIT):                               # fixed order: deterministic
                row = part_ptr + (s * ROWS + p64) * (2 * F) + offs
                g += tl.load(row, mask=gm, other=0.0)
                u += tl.load(row + F, mask=gm, other=0.0)
            g = to_bf16(g, RNE_FIX).to(tl.float32)                        # the expert GEMMs return bf16
            u = to_bf16(u, RNE_FIX).to(tl.float32)
            u = tl.minimum(tl.maximum(u, -limit), limit)
            g = tl.minimum(g, limit)
            act = to_bf16(g / (1.0 + tl.exp(-g)) * u * rw, RNE_FIX).to(tl.float32)
            code, sc = _quant_groups(act)
            tl.store(aq_ptr + p64 * F + offs, code.to(tl.uint8), mask=gm)
            tl.store(sa_ptr + p64 * NG + gi, sc, mask=gi < NG)


@triton.jit
def _grouped_combine_kernel(part_ptr, inv_ptr, shared_ptr, out_ptr, TK, ROWS, D,
                            K: tl.constexpr, SPLIT: tl.constexpr, BLOCK: tl.constexpr, HAS_SHARED: tl.constexpr,
                            SHARED_ROWS: tl.constexpr, OUT_BF16: tl.constexpr, RNE_FIX: tl.constexpr):
    # HAS_SHARED: + shared (T, D) bf16; SHARED_ROWS: + bf16(the shared expert's partials at rows TK + t)
    # part (SPLIT, TK, D) fp32 by position; inv (TK,) int32 position of each slot (-1: not local) -> out (T, D)
    t = tl.program_id(0)
    d = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    dm = d < D
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for k in tl.static_range(K):
        p = tl.load(inv_ptr + t * K + k)
        m = dm & (p >= 0)
        y = tl.zeros((BLOCK,), dtype=tl.float32)
        for s in tl.static_range(SPLIT):
            y += tl.load(part_ptr + (s * ROWS + p).to(tl.int64) * D + d, mask=m, other=0.0)
        acc += to_bf16(y, RNE_FIX).to(tl.float32)                        # each expert's output is bf16
    if SHARED_ROWS:
        y = tl.zeros((BLOCK,), dtype=tl.float32)
        for s in tl.static_range(SPLIT):
            y += tl.load(part_ptr + (s * ROWS + TK + t).to(tl.int64) * D + d, mask=dm, other=0.0)
        acc += to_bf16(y, RNE_FIX).to(tl.float32)                        # shared_expert returns bf16
    if HAS_SHARED:
        acc += tl.load(shared_ptr + t * D + d, mask=dm, other=0.0).to(tl.float32)
    if OUT_BF16:
        tl.store(out_ptr + t * D + d, to_bf16(acc, RNE_FIX), mask=dm)
    else:
        tl.store(out_ptr + t * D + d, acc, mask=dm)


# (SPLIT_UP, SPLIT_DOWN) wishes: the wrapper lowers each to the largest divisor of the K blocks (D/128, F/128)
GROUPED_SPLITS = ((1, 1), (2, 1), (2, 2), (4, 2), (8, 4), (16, 8))


def grouped_configs(params: dict) -> list[dict]:
    # tiles: the 4-warp MOE_TILES (the same K-loop body as the v1 kernels: spill-free on sm_120), 3 stages; DECODE
    # "fp8" (portable) or "fp8_asm" (inline PTX word ops, compiled runs only; the interpreter runs "fp8"), the latter
    # for BN >= 64. Left out, measured on the H200 (docs/perf/moe.md, call 2): 8 warps 1.2-2x slower at every C;
    # 2 stages 4-7% slower (and the fused W1/W3 kernel spills 16 B on sm_120 there). 60 configs (+ 6 BDIAG, + 6
    # more with SHARED "side"). SHARED (moe_layer, moe_experts with the shared expert): "fused" (work item 0 of the
    # routed launches), "side" (its own fp8_linear launches on a side stream beside the gate and the routed
    # launches, added in the combine: the BDIAG entries' second value, with the shared expert only) or "beside" (the
    # same launches first, on the one stream: KERNELBENCH_PIN_CONFIG to compare).
    # Every entry loads the scales a K block ahead and splits the shared expert by token tile (SCALES "ahead",
    # SHARED_ITEMS "per_tile": faster at C = 1, 16, 64 on the H200, docs/perf/moe.md session 4); "bytes" / "one",
    # EPILOGUE "swiglu" (BN_UP 128, no K split) and MAXNREG_UP / MAXNREG_DOWN are reachable by an explicit config.
    out = []
    for bm, bu, bd, w in (t for t in MOE_TILES if t[3] == 4):
        for su, sd in GROUPED_SPLITS:
            for st in (3,):
                for dec in ("fp8", "fp8_asm") if max(bu, bd) >= 64 else ("fp8",):
                    out.append({"BM": bm, "BN_UP": bu, "BN_DOWN": bd, "SPLIT_UP": su, "SPLIT_DOWN": sd,
                                "num_warps": w, "num_stages": st, "DECODE": dec, "SHARED": "fused",
                                "SCALES": "ahead", "SHARED_ITEMS": "per_tile"})
    # BDIAG (session 9's default) at BN 64/64 with slot tiles of 8 and the shared expert's token tile of 16, every
    # split; not at BM 16: slower at C=64 (H200 sweep r4) and its C=1 down kernel spills 544 B on sm_120
    for shared in ("fused", "side") if params.get("shared") else ("fused",):
        for su, sd in GROUPED_SPLITS:
            out.append({"BM": 8, "BM_SHARED": 16, "BN_UP": 64, "BN_DOWN": 64, "SPLIT_UP": su, "SPLIT_DOWN": sd,
                        "num_warps": 4, "num_stages": 3, "DECODE": "fp8_asm", "SHARED": shared, "SCALES": "ahead",
                        "SHARED_ITEMS": "per_tile", "BDIAG": True})
    if params.get("shared"):     # moe_experts given the shared expert: SHARED_SCALES (shared_scales_configs)
        out += shared_scales_configs(out)
    return out


# config keys that the spaces add to a plain tile entry (one_token_tiles leaves entries carrying them out)
_ADDED_OPTIONS = ("GATE", "SHARED_SCALES", "UP_EARLY")


def one_token_tiles(space: list[dict]) -> list[dict]:
    """The space's plain BDIAG entries at the (4, 2) split with the shared expert fused (the one-token default's
    tiles and splits), which the options below are added to."""
    return [c for c in space if c.get("BDIAG") and c["SHARED"] == "fused" and (c["SPLIT_UP"], c["SPLIT_DOWN"]) == (4, 2)
            and not any(k in c for k in _ADDED_OPTIONS)]


def shared_scales_configs(space: list[dict]) -> list[dict]:
    """The fused shared items' scale bytes a K block ahead (config SHARED_SCALES "ahead"; session 36: level at one
    token on an H100, docs/perf/h100-2026-12-05-session36.md) on one_token_tiles."""
    return [{**c, "SHARED_SCALES": "ahead"} for c in one_token_tiles(space)]


def gated_configs(params: dict) -> list[dict]:
    """moe_layer's and moe_routed's space: grouped_configs plus, on the BDIAG (4, 2) tiles, one entry with the whole
    gate in one launch with tensor-core logits (GATE "mma"; timed in session 19: level alone, and in session 22 the
    step 1.6% / 2.7% slower with it at C = 16 / 64, decode-bench --try) and, up to GATE_FUSE_MAX_T tokens, one with
    the one-launch gate's slot sort from its top-k in registers (GATE "fused", ROUTE_SORT "slots"; session 22, H200:
    moe_routed T = 1 0.3 us slower, moe_layer and the C = 1 step level), so that `kernelbench verify` covers those
    paths and `kernelbench tune` times them beside the default gates. At one token also the gate without its last
    program, each routed W1 / W3 program taking the top-k itself (GATE_TAIL "up", _gate_tail), and the gate's top-k
    padded to two rows as before session 51 (GATE_TOPK_ROWS 2; the default takes one row). Where the combine runs in
    the W2 launch (up to FIN_MAX_T tokens), its ticket taken by every program of the grid (COMBINE_TICKETS "all",
    the default until session 53)."""
    out = grouped_configs(params)
    base = one_token_tiles(out)[0]
    slots = [{**base, "GATE": "fused", "ROUTE_SORT": "slots"}] if params.get("T", 1) <= GATE_FUSE_MAX_T else []
    if params.get("T", 1) == 1:
        slots.append({**base, "GATE": "fused", "GATE_TAIL": "up"})
        slots.append({**base, "GATE": "fused", "GATE_TOPK_ROWS": 2})
    if params.get("T", 1) <= FIN_MAX_T:
        slots.append({**base, "COMBINE_TICKETS": "all"})
    ahead = [] if params.get("shared") else shared_scales_configs(out)     # (grouped_configs added it with "shared")
    # above one token, with the gate GEMM and its routing launch (GATE "gemm", the default above GATE_FUSE_MAX_T): the
    # W1 / W3 launch started beside the routing launch (UP_EARLY "spec", up_early), the shared expert beside as the
    # defaults there run it
    early = [{**base, "GATE": "gemm", "SHARED": "side", "UP_EARLY": "spec"}] if params.get("T", 1) > 1 else []
    return out + [{**base, "GATE": "mma"}] + slots + ahead + early


SHARED_MODES = ("fused", "side", "beside")
SHARED_SCALES = ("step", "ahead")    # the fused shared items' weight-scale bytes: in their K block's step, or one ahead
# From this many tokens the default runs the shared expert (whole, or a TP rank's slice) on a side stream beside the
# gate and the routed launches (SHARED "side"), and the routed launches take the routed-only choices: with the shared
# items compiled in, the sm_90 up kernel takes 146 registers and 55 KB of shared memory against 116 and 22.5 KB
# without (session 15), which costs the routed items. H200 (data/h200-2026-12-03-session16): moe_layer C = 16 78.4 vs
# 86.9 us, C = 64 157.5 vs 180.6 (call 1, against impl triton_v5); the 43-layer Flash TP8 step with each rank's slice
# C = 16 -2.8%, C = 64 -3.2% (call 1). Below it the routed launches carry it (SHARED "fused"): side from 2 tokens
# made the step +3.3% / +11% / -1.0% at C = 2 / 4 / 8 (call 3), and moe_layer at one token took 35.65 vs 28.64 us.
# Session 17, with the op's side stream below the main chain's priority (kernels/common.py stream_priority), side
# from 8 tokens against 16, A B A B (data/h200-2026-12-03-session17/call5): C = 8 6.007 / 6.005 vs 6.190 / 6.168 ms
# (-2.8%), C = 12 6.488 / 6.453 vs 6.728 / 6.706 (-3.6%). 5 to 7 tokens are not measured.
SHARED_SIDE_MIN_T = 8


def grouped_default_v2(params: dict) -> dict:
    """The session-3 choices (impl triton_v2): four scale-byte loads per K block, each used in its own iteration, and
    the session-3 glue (GLUE "v2": separate top-k, serial slot sort, SwiGLU-quant and combine launches)."""
    T = params["T"]
    su, sd = (8, 4) if T <= 2 else ((4, 2) if T <= 8 else ((2, 1) if T <= 32 else (1, 1)))
    return {"BM": 16, "BN_UP": 64, "BN_DOWN": 64, "SPLIT_UP": su, "SPLIT_DOWN": sd, "num_warps": 4,
            "num_stages": 3, "DECODE": "fp8_asm", "SHARED": "fused", "SCALES": "bytes", "SHARED_ITEMS": "one",
            "GLUE": "v2"}


def grouped_default(params: dict) -> dict:
    # Session 9 (H200, scripts/moe_sweep.py --sweep r4, data/h200-2026-12-02-session9/call1, same inputs per case):
    # BDIAG (two scale groups per dot against block-diagonal x tiles) with routed slot tiles of 8 and the shared
    # expert's token tile kept at 16 (BM_SHARED): moe_layer C=64 181.6 vs 202.3 us, C=16 85.6 vs 99.3, moe_experts
    # (routed only) C=64 155.2 vs 181.2; moe_layer C=1 27.9 vs 29.5 (BDIAG at BM 16: 27.5). Alone, BM 8 lost (the
    # N = 8 dot falls back to fp16 HMMA on sm_90: 253.8 at C=64) and so did BDIAG at BM 16 (246.3: 183 registers).
    # At C=1 BM 8 too: BDIAG at BM 16 there needs 254 registers in the up kernel and spills 544 B in the down kernel
    # on sm_120 (kernelbench inspect; the 32-token combine block beside the (BN, 32) accumulators). Above 32 tokens
    # the up step split in 2 (sweep r6, call 4, one run: moe_layer C=64 181.0 vs 186.4 us, moe_experts 160.1 vs
    # 163.0; (2, 2) 179.0 / 159.1, but its down kernel under moe_layer's 80-register cap spills 16 B on sm_120).
    # Session 12 (sweep r9, data/h200-2026-12-02-session12/call5): routed only (moe_routed / moe_experts, the step's
    # MoE from C = 16 on, the shared expert beside) above 32 tokens split (4, 2): moe_routed C=64 140.8 vs 149.2 us
    # ((4, 1) 141.5, (2, 2) 148.8, (1, 1) 159.1): more, shorter up programs against the last partial wave.
    return _grouped_default(params, SHARED_SIDE_MIN_T)


# moe_routed (the decode step's MoE) from this many tokens: the W1 / W3 launch started beside the routing launch with
# the first UP_EARLY_PER_SM programs of each SM guessing their span (UP_EARLY "spec", up_early), 1 per SM below 64
# tokens and 2 from 64. Session 40 on an H100 80GB HBM3 (data/h100-2026-12-06-session40, the 43-layer step, 30
# interleaved pairs, delta = step - trial with its 95% interval; the A/A controls within +-0.02 ms):
# - C = 64: 2 per SM +0.080 (+0.055 .. +0.095) ms, 4 +0.067 / +0.078, 8 -0.124 (slower), "launch" (no guess) -0.013
#   (within noise), every program guessing -1.90 ms (the inactive experts' spans: twice the bytes);
# - C = 32: 1 per SM +0.032 (+0.015 .. +0.042, inside the control's shift), 4 level;
# - C = 16: 1 per SM +0.027 (+0.015 .. +0.035), 4 -0.088 / -0.085 (slower), "launch" +0.008 (within noise).
# As shipped (call 5): UP_EARLY "off" over this default made the step 0.019 ms slower at C = 16 and 0.092 at C = 64.
# The same for W2 (built at 9126f60, removed: the W2 launch beside the SwiGLU-quant launch, its first 4 / 2 programs
# per SM prefetching their known W2 span) made the step slower: -0.167 / -0.100 ms at C = 16, -0.147 / -0.069 at 64.
# moe_layer keeps it off: with the whole shared expert beside, 4 per SM made it slower alone (H100, call 3: 88.3 ->
# 94.9 us at 16 tokens, 182.1 -> 191.9 at 64): the early programs hold SMs the shared expert's launches need.
UP_EARLY_MIN_T = 16


def routed_default(params: dict) -> dict:
    """moe_routed's default: grouped_default, and from UP_EARLY_MIN_T tokens UP_EARLY "spec" (above)."""
    cfg = grouped_default(params)
    if params["T"] >= UP_EARLY_MIN_T:
        cfg.update(UP_EARLY="spec", UP_EARLY_PER_SM=1 if params["T"] < 64 else 2)
    return cfg


def grouped_default_v5(params: dict) -> dict:
    """The session-15 choices (impl triton_v5): the shared expert inside the routed launches at every token count."""
    return _grouped_default(params, None)


def layer_default_v5(params: dict) -> dict:
    return grouped_default_v5({**params, "shared": True})


def _grouped_default(params: dict, side_from: int | None) -> dict:
    side = bool(params.get("shared")) and side_from is not None and params["T"] >= side_from
    whole_beside = side and whole_shared(params)
    if side:                  # the routed launches run without the shared expert: the routed-only choices
        params = {**params, "shared": False}
    cfg = {**grouped_default_v4(params), "BDIAG": True, "BM": 8, "BM_SHARED": 16}
    if params["T"] > 32:
        cfg.update(SPLIT_UP=2) if whole_shared(params) else cfg.update(SPLIT_UP=4, SPLIT_DOWN=2)
    if side:
        cfg["SHARED"] = "side"
    if whole_beside:          # the chunked slot sort (session 18, call 4, interleaved: moe_layer with the whole shared
        # expert beside was slower with the token form although its routing launch was faster: T = 16 77.7 / 77.8
        # vs 77.2 / 77.2 us, T = 64 158.1 / 158.0 vs 156.2 / 156.0; moe_routed with a TP slice was faster, _sort_mode)
        cfg["ROUTE_SORT"] = "chunk"
    return cfg


def grouped_default_v4(params: dict) -> dict:
    """The session-5 choices (impl triton_v4; the default through session 8): one 32-group per fp8 dot, BM 16."""
    # H200, Flash TP8 moe_experts (scripts/moe_sweep.py, 2026-12-01, docs/perf/moe.md). Official layout: BN 64/64
    # with the inline-PTX decode beat BN 32/32 at every C (C=1 35.1 vs 39.0 us, C=16 220 vs 345, C=64 357 vs 573).
    # PAIR64, 3 stages: K split (8, 4) at C=1 29.5 us (one touched expert: 32 x 8 up and 64 x 4 down items; (4, 2)
    # 30.9, (16, 8) 32.8); C=16 (2, 1) 158.7 vs no split 163.9; C=64 no split 243.2 vs (2, 1) 253.6. 8 warps: 1.2-2x
    # slower everywhere; 2 stages: +4-7% (and the fused up kernel spills 16 B on sm_120 there).
    # Session 4 (moeup call 1): SCALES "ahead" + SHARED_ITEMS "per_tile" vs triton_v2: moe_experts 26.9 / 126.5 /
    # 217.3 us vs 29.3 / 157.6 / 243.9 at C = 1 / 16 / 64, moe_layer C=64 229.4 vs 257.0; with the new loads BN 128
    # still lost (C=64 227.4 (128/128), 225.2 (128/64); C=16 144.2; C=1 29.5) and 4 stages tied (217.9, 126.5).
    # Session 5 (moe4, H200 mid-session sweep, same inputs per case, data/h200-2026-12-01-moe4/mid): GATE "fused"
    # (moe_layer: gate GEMV + top-k + slot sort + x quant in one launch) up to GATE_FUSE_MAX_T tokens (moe_gate C=1
    # 6.47 vs 8.03 us; at C=16 26.2 vs 8.55: not there). Splits / register caps per C, separately with the fused
    # shared expert (params "shared": moe_layer, and moe_experts given the shared weights) and without:
    #   shared, C=1: SPLIT (4, 2) + FIN_TOKENS 8, moe_layer 29.9 vs 35.7 us (FIN_TOKENS 8 alone 33.0, (4, 4) 31.1,
    #     (8, 2) 32.0, (2, 2) 33.9); C=16: MAXNREG_DOWN 80, 100.9 vs 102.5; C=64: MAXNREG_DOWN 80, 204.3 vs 204.8;
    #   routed only, C=16: SPLIT (4, 2), moe_experts 108.4 vs 116.9 ((2, 2) 114.0, (1, 1) 132.1, MAXNREG_DOWN 80
    #     114.2); C=64: MAXNREG_DOWN 80 186.3 vs 188.1 but it spills 32 B on sm_120 there: not shipped (X_ONCE 193.1,
    #     SPLIT_DOWN 2 188.0, EPILOGUE "swiglu" 194.3).
    T, shared = params["T"], whole_shared(params)
    cfg = {**grouped_default_v3(params), **gate_default(params)}
    if shared and T <= 2:
        cfg.update(SPLIT_UP=4, SPLIT_DOWN=2, FIN_TOKENS=8)
    elif 8 < T <= 32:
        cfg.update(MAXNREG_DOWN=80) if shared else cfg.update(SPLIT_UP=4, SPLIT_DOWN=2)
    elif T > 32 and shared:     # routed only: the capped down kernel spills 32 B on sm_120 at C=64 (inspect)
        cfg.update(MAXNREG_DOWN=80)
    return cfg


def layer_default(params: dict) -> dict:
    """moe_layer's default: grouped_default with the fused shared expert."""
    return grouped_default({**params, "shared": True})


def layer_default_v4(params: dict) -> dict:
    """moe_layer's session-5 default (impl triton_v4)."""
    return grouped_default_v4({**params, "shared": True})


def grouped_default_v3(params: dict) -> dict:
    """The session-4 choices (impl triton_v3): scale words a K block ahead, the shared expert per token tile, the
    bf16 gate GEMM + _gate_route_kernel (GATE "gemm")."""
    T = params["T"]
    su, sd = (8, 4) if T <= 2 else ((4, 2) if T <= 8 else ((2, 1) if T <= 32 else (1, 1)))
    return {"BM": 16, "BN_UP": 64, "BN_DOWN": 64, "SPLIT_UP": su, "SPLIT_DOWN": sd, "num_warps": 4,
            "num_stages": 3, "DECODE": "fp8_asm", "SHARED": "fused", "SCALES": "ahead", "SHARED_ITEMS": "per_tile",
            "GATE": "gemm"}


# ---- the kernel's weight layout, made once at load ------------------------------------------------------------
PAIR64 = 32     # prepared routed-expert codes: [El, N, K/64, 32] uint8 (the official layout is [El, N, K/2])


def prepare_expert_weights(w: torch.Tensor) -> torch.Tensor:
    """Official packed e2m1 codes [..., N, K/2] (byte i = value 2i | value 2i+1 << 4) -> the PAIR64 layout
    [..., N, K/64, 32] that fp4_pair_dot decodes: byte j of each 64-value chunk = value j | value 32 + j << 4.
    A pure permutation of the nibbles (the UE8M0 scales keep their layout); done once per expert at load."""
    if w.dtype != torch.uint8 or w.dim() < 2 or w.shape[-1] % 32:
        raise ValueError(f"prepare_expert_weights: uint8 [..., N, K/2] with K % 64 == 0 expected, got "
                         f"{w.dtype} {tuple(w.shape)}")
    out = torch.empty((*w.shape[:-1], w.shape[-1] // 32, PAIR64), dtype=torch.uint8, device=w.device)
    for i in range(w.shape[0]) if w.dim() > 2 else (None,):          # one expert at a time: bounded temporaries
        src = w if i is None else w[i]
        v = torch.stack((src & 15, src >> 4), -1).reshape(*src.shape[:-1], -1, 2, PAIR64)   # [N, K/64, 2, 32]
        (out if i is None else out[i]).copy_(v[..., 0, :] | (v[..., 1, :] << 4))
    return out


def official_expert_weights(w: torch.Tensor) -> torch.Tensor:
    """The inverse of prepare_expert_weights: PAIR64 [..., N, K/64, 32] -> official [..., N, K/2]."""
    v = torch.stack((w & 15, w >> 4), -2).reshape(*w.shape[:-2], -1)                         # values in k order
    return (v[..., 0::2] | (v[..., 1::2] << 4)).contiguous()


def prepare_experts(inputs: dict) -> dict:
    """The load-time transform of moe_experts / moe_layer inputs (Impl.prepare): w1, w3, w2 to PAIR64."""
    return {**inputs, **{k: prepare_expert_weights(inputs[k]) for k in ("w1", "w3", "w2")
                         if isinstance(inputs.get(k), torch.Tensor) and inputs[k].dim() == 3}}


def _layout(w1, w3, w2):
    """-> (pair, w1, w3, w2) with the codes as [El, N, K/2] views for the kernel and the checks."""
    dims = {w1.dim(), w3.dim(), w2.dim()}
    if dims == {4} and all(w.shape[-1] == PAIR64 for w in (w1, w3, w2)):
        return True, *(w.reshape(w.shape[0], w.shape[1], -1) for w in (w1, w3, w2))
    if dims - {3}:
        raise ValueError(f"moe_experts: w1, w3, w2 must all be official [El, N, K/2] or all PAIR64 [El, N, K/64, 32] "
                         f"(kernels.moe.prepare_expert_weights), got {tuple(w1.shape)}, {tuple(w3.shape)}, "
                         f"{tuple(w2.shape)}")
    return False, w1, w3, w2


def _shared_params(hw: dict | None) -> dict:
    """The defaults' params for the optional shared expert: `shared`, and `Fs` its inner dimension."""
    return {"shared": hw is not None, **({"Fs": hw["w1"].shape[0]} if hw is not None else {})}


def whole_shared(params: dict) -> bool:
    """Whether the defaults pick the choices measured with the shared expert in the grouped launches: it is there
    and at least half of F. A TP rank's slice of it (Fs = F / 8 at Flash TP8: kernelbench/decoder/model.py
    shared_split) adds an eighth of an expert's work, so the routed-only choices stay."""
    fs = params.get("Fs")
    return bool(params.get("shared")) and (fs is None or 2 * fs > params.get("F", fs))


def _aligned(t: torch.Tensor) -> torch.Tensor:
    t = t.contiguous()
    return t if t.data_ptr() % 16 == 0 else t.clone()       # the decode reads 32-bit words


def _fusable_shared(hw: dict, D: int, F: int) -> bool:
    """The shared expert's FP8 weights can run inside the grouped kernels: the routed experts' D, an inner dimension
    Fs that is a multiple of 128 and at most their F (Fs < F: a TP rank's slice of the replicated shared expert)."""
    check_device(*hw.values())
    for n in ("w1", "w3", "w2"):
        check_dtype(f"shared_{n}", hw[n], torch.float8_e4m3fn)
    for n in ("s1", "s3", "s2"):
        check_dtype(f"shared_{n}", hw[n], torch.float8_e8m0fnu)
    fs = hw["w1"].shape[0] if hw["w1"].dim() == 2 else -1
    if fs <= 0 or fs > F or fs % 128:
        return False
    want = {"w1": (fs, D), "w3": (fs, D), "w2": (D, fs), "s1": (fs // 128, D // 128), "s3": (fs // 128, D // 128),
            "s2": (D // 128, fs // 128)}
    return all(tuple(hw[k].shape) == v for k, v in want.items())


def _regs(cfg: dict, key: str) -> dict:
    """Config MAXNREG_UP / MAXNREG_DOWN: a register cap per thread for that launch (more resident blocks per SM:
    4 warps at <= 96 registers fit 5 blocks, <= 80 six); ignored by the interpreter."""
    return {"maxnreg": int(cfg[key])} if cfg.get(key) and not INTERPRET else {}


def item_table_offset(El: int) -> int:
    """Where the item table starts in the act buffer (int32 index; 16-byte aligned rows): after [n, El experts]."""
    return (El + 4) // 4 * 4


XQ_GROUPS = 4      # 128-value groups of x each act-quant program of a routing launch quantizes (_quant_x_block GB)


def _xquant_programs(T: int, D: int) -> int:
    """The act-quant programs a routing launch adds after its others: one per (row, XQ_GROUPS groups of 128)."""
    return T * triton.cdiv(D // 128, XQ_GROUPS)


def _route_buffers(T, K, D, El, dev):
    """The routing lists (act, start, order, inv) and the act-quantized x (xq, sx) that _grouped consumes."""
    i32 = dict(dtype=torch.int32, device=dev)
    return (torch.empty(item_table_offset(El) + 4 * El, **i32), torch.empty(El + 1, **i32), torch.empty(T * K, **i32),
            torch.empty(T * K, **i32), torch.empty((T, D), dtype=torch.uint8, device=dev),
            torch.empty((T, D // 128), dtype=torch.float32, device=dev))


# Largest (tokens padded to a power of two) x (local experts padded) that the slot sort scans over tokens in one
# (TS, ELP) tile (ROUTE_SORT "token", the default there); larger batches sort in CH-slot chunks ("chunk").
SORT_BY_TOKEN_MAX = 4096


def _sort_mode(cfg, T: int, El: int, fused: bool = False) -> str:
    """Config ROUTE_SORT: "token" (one scan over the tokens), "chunk", or "slots" (`fused`, the one-launch gate only:
    from its top-k in registers, _route_from_slots; opt-in, not yet timed). Default: "token" in the routing launch after
    the gate GEMM (more than GATE_FUSE_MAX_T tokens) while it fits SORT_BY_TOKEN_MAX; "chunk" in the one-launch gate,
    whose few slots (<= 24) sort in one chunk, where the token form was not measured faster (session 18, call 3).
    H200, session 18 (data/h200-2026-12-03-session18), the routing launch alone (Nsight Compute, call 4): T = 16
    7.8-7.9 vs 8.3-8.8 us, T = 64 10.3 vs 11.9-12.0 us; moe_routed op bench, interleaved (call 4): T = 16 69.0 / 69.1
    vs 69.6 / 69.7 us, T = 64 139.2 / 139.2 vs 141.1 / 141.1; the 43-layer step (call 2, A B A B): C = 64 10.608 /
    10.612 vs 10.714 / 10.739 ms. (moe_layer with the whole shared expert beside: slower, grouped_default.)"""
    fits = triton.next_power_of_2(T) * max(2, triton.next_power_of_2(El)) <= SORT_BY_TOKEN_MAX
    mode = (cfg or {}).get("ROUTE_SORT") or ("token" if fits and T > GATE_FUSE_MAX_T else "chunk")
    if mode not in ("token", "chunk", "slots"):
        raise ValueError(f"moe_layer: config ROUTE_SORT={mode!r}: 'token', 'chunk' or 'slots'")
    if mode == "slots" and not fused:
        raise ValueError("moe_layer: config ROUTE_SORT 'slots' sorts from the top-k in the one-launch gate's "
                         "registers: it needs GATE 'fused'")
    return mode


def _sort_meta(T, K, El, ch: int = 128, sort: str = "chunk"):
    # "chunk": CH 128 x ELP 32 (Flash: 32 local experts): a 4096-entry one-hot chunk, 32 values per thread at 4 warps;
    # each chunk is a round trip of key loads in each of the sort's two passes (config ROUTE_CH: the largest chunk).
    # "token": TS = the tokens padded (_sort_slots_by_token), KW = K padded.
    return dict(ELP=max(2, triton.next_power_of_2(El)), CH=min(ch, max(16, triton.next_power_of_2(T * K))),
                TS=max(2, triton.next_power_of_2(T)) if sort == "token" else 0, KW=max(2, triton.next_power_of_2(K)))


def _route_options(cfg) -> tuple[int, int]:
    """Options of the routing launch after the gate GEMM (_gate_route_kernel; GATE "gemm"): ROUTE_CH, the slot
    sort's largest chunk (a power of two, 16..1024; default 128), and ROUTE_WARPS, its warps per program (1, 2, 4
    or 8; default 4)."""
    ch = int((cfg or {}).get("ROUTE_CH", 128))
    if ch < 16 or ch > 1024 or ch & (ch - 1):
        raise ValueError(f"moe_layer: config ROUTE_CH={ch}: a power of two in 16..1024")
    return ch, _warps_option(cfg, "ROUTE_WARPS", 4, "moe_layer")


def _route(x, indices, El, expert_offset, glue, sort: str = "chunk", early: str | None = None):
    """Group the slots by local expert and act-quantize x, one launch: glue v3 / v4 _gate_route_kernel (sort in one
    program, vectorized; x in (row, 4-group) programs), "v2" _route_kernel (the serial sort; one program per row).
    early (config UP_EARLY, up_early: "launch" or "spec"): the launch lets the W1 / W3 launch after it start at once
    (_gate_route_kernel PDL)."""
    T, D = x.shape
    K = indices.shape[1]
    buf = _route_buffers(T, K, D, El, x.device)
    act, start, order, inv, xq, sx = buf
    idx = indices.contiguous()
    if glue == "v2":
        _route_kernel[(1 + T,)](idx, x, xq, sx, act, start, order, inv, T * K, int(expert_offset), El,
                                D=D, ELP=triton.next_power_of_2(El + 1), CH=64, GB=8, num_warps=4, num_stages=1)
        return buf
    _gate_route_kernel[(1 + _xquant_programs(T, D),)](
        x, x, x, x, x, idx, x, xq, sx, act, start, order, inv, act, T, 1, 1.0, int(expert_offset), El, D=D, K=K,
        KP=1, EP=1, HAS_BIAS=False, HASH=False, TOPK=False, **_sort_meta(T, K, El, sort=sort), GB=XQ_GROUPS,
        num_warps=4, num_stages=1, PDL=early is not None)
    return buf


def _gate_route(x, weight, bias, tid2eid, token_ids, topk, route_scale, El, expert_offset, cfg=None):
    """moe_layer's gate, glue v3 / v4: the gate GEMM, then ONE launch (_gate_route_kernel) for the top-k of every
    token, the slot sort by the last top-k program (ticket) and the act-quantization of x (`cfg`: _route_options).
    -> w, idx and the routing buffers of _route."""
    ch, warps = _route_options(cfg)
    w, idx, args, meta = _gate_logits(x, weight, bias, tid2eid, token_ids, topk, route_scale)
    T, D = x.shape
    buf = _route_buffers(T, topk, D, El, x.device)
    act, start, order, inv, xq, sx = buf
    _gate_route_kernel[(T + _xquant_programs(T, D),)](
        *args[:6], x.contiguous(), xq, sx, act, start, order, inv, split_tickets(x.device, 1), T, *args[6:],
        int(expert_offset), El, D=D, **meta, TOPK=True, **_sort_meta(T, topk, El, ch, _sort_mode(cfg, T, El)),
        GB=XQ_GROUPS, num_warps=warps, num_stages=1, PDL=up_early(cfg, x.device) is not None)
    return w, idx, buf


# GATE "mma" (opt-in; timed in session 19): the logits' token and expert blocks and the D splits. TB 16 rows (the MMA's
# smallest M), EB 64 experts (an (16, 64) fp32 accumulator: 8 registers a thread at 4 warps), S 16 splits of D
# (D / 16 = 256 at Flash: four 64-wide steps; a last program sums 16 x 4 KB of partials).
GATE_MMA_TB, GATE_MMA_EB, GATE_MMA_BD = 16, 64, 64


def _gate_mma_split(cfg, D: int) -> int:
    """Config GATE_SPLIT_D: the D splits of GATE "mma", a power of two dividing D / GATE_MMA_BD (default: the
    largest such up to 16)."""
    nb = D // GATE_MMA_BD
    s = int((cfg or {}).get("GATE_SPLIT_D", max(k for k in (1, 2, 4, 8, 16) if nb % k == 0)))
    if s < 1 or s & (s - 1) or D % (s * GATE_MMA_BD):
        raise ValueError(f"moe_layer: config GATE_SPLIT_D={s}: a power of two dividing D / {GATE_MMA_BD} = "
                         f"{D // GATE_MMA_BD}")
    return s


def _gate_mma(x, weight, bias, tid2eid, token_ids, topk, route_scale, El, expert_offset, cfg=None):
    """moe_layer's gate in one launch with tensor-core logits (_gate_mma_kernel, GATE "mma"): -> w, idx and the
    routing buffers of _route, as _gate_route (which needs the gate GEMM's launch before it)."""
    w, idx, args, meta = _gate_args(x, weight, bias, tid2eid, token_ids, topk, route_scale)
    T, D = x.shape
    E = weight.shape[0]
    if D % GATE_MMA_BD:
        raise ValueError(f"moe_layer: config GATE 'mma' needs D a multiple of {GATE_MMA_BD}, got D={D}")
    S = _gate_mma_split(cfg, D)
    if T > 64:      # its tickets (1 + 5 x token blocks) stay below the up launch's range (XOWN_TICKETS)
        raise ValueError(f"moe_layer: config GATE 'mma' is for decode batches (T <= 64), got T={T}")
    EB = max(16, min(GATE_MMA_EB, meta["EP"]))                   # (an MMA's N is 16 at least)
    ntb = triton.cdiv(T, GATE_MMA_TB)
    neb = triton.cdiv(E, EB)
    part = torch.empty((S, T, E), dtype=torch.float32, device=x.device)
    # scored: the candidates' scores and log scores (2, T, NEB x KP) in place of the logits, their ids in cid
    nc = triton.next_power_of_2(neb) * meta["KP"]
    cand = args[0] if meta["HASH"] else torch.empty((2, T, nc), dtype=torch.float32, device=x.device)
    cid = torch.empty((T, nc), dtype=torch.int32, device=x.device)
    warps = _warps_option(cfg, "GATE_MMA_WARPS", 4, "moe_layer")
    buf = _route_buffers(T, topk, D, El, x.device)
    act, start, order, inv, xq, sx = buf
    grid = ntb * neb * S + _xquant_programs(T, D)
    _gate_mma_kernel[(grid,)](
        x.contiguous(), weight.contiguous(), part, cand, cid, *args[1:6], xq, sx, act, start, order, inv,
        split_tickets(x.device, 1 + ntb * neb + ntb), T, E, ntb, float(route_scale), int(expert_offset), El, D=D,
        **meta, TB=GATE_MMA_TB, EB=EB, NEB=neb, BD=GATE_MMA_BD, S=S, NC=nc,
        **_sort_meta(T, topk, El, sort=_sort_mode(cfg, T, El)), GB=XQ_GROUPS, DOT_UPCAST=INTERPRET, num_warps=warps,
        num_stages=2)
    return w, idx, buf


def _grouped(x, weights, indices, w1, s1, w3, s3, w2, s2, expert_offset, swiglu_limit, cfg, shared, out_dtype, pair,
             hw=None, routed=None, score_gate=False, join=None, local=None):
    # shared: the shared expert's output (T, D) bf16 to add (join: called before the first launch that reads it, when
    # it is made beside these launches); hw: the shared expert's FP8 weights to run inside;
    # routed: the routing buffers when the gate made them (_gate_route), else _route makes them here; local: the up
    # launch's LOCAL arguments when the gate left the top-k to it (_gate_fused, GATE_TAIL "up"); config GLUE:
    # "v4" (default up to FIN_MAX_T tokens): the parallel routing, SwiGLU-quant and combine inside the GEMM launches
    # (FIN); "v3" (default above): the same routing, SwiGLU-quant and combine as launches of their own with wider
    # grids; "v2": the previous glue
    T, D = x.shape
    glue = _glue(cfg, T)
    K = indices.shape[1]
    El, F = w1.shape[0], w1.shape[1]
    TK = T * K
    ROWS = TK + (T if hw is not None else 0)       # partial / activation rows: local slots, then shared tokens
    dev = x.device
    su = _fit_split(int(cfg.get("SPLIT_UP", 1)), D // 128)
    sd = _fit_split(int(cfg.get("SPLIT_DOWN", 1)), F // 128)
    asm = cfg.get("DECODE", "fp8") == "fp8_asm" and not INTERPRET
    bm, bu, bd = cfg["BM"], cfg["BN_UP"], cfg["BN_DOWN"]
    if F % bu or D % bd:
        raise ValueError(f"moe_experts: BN_UP={bu} must divide F={F} and BN_DOWN={bd} D={D}")
    w1, w3, w2 = _aligned(w1), _aligned(w3), _aligned(w2)
    s1, s3, s2 = (s.contiguous().view(torch.uint8) for s in (s1, s3, s2))
    x = x.contiguous()
    scales = cfg.get("SCALES", "bytes")
    if scales not in ("bytes", "ahead"):
        raise ValueError(f"moe_experts: config SCALES={scales!r}: 'bytes' or 'ahead'")
    # PF: 0 scale bytes per K block, 1 scale words a block ahead, 2 the same with X_ONCE (the gated step's x tiles
    # loaded once for W1 and W3), 3 BDIAG
    pf = (2 if cfg.get("X_ONCE") else 1) if scales == "ahead" else 0
    if cfg.get("BDIAG"):          # two scale groups per dot against block-diagonal x tiles (bdiag_x)
        if scales != "ahead":
            raise ValueError("moe_experts: config BDIAG needs SCALES 'ahead'")
        if pair:                  # the official layout (weights not prepared) keeps one group per dot
            pf = 3
    launch = dict(num_warps=cfg["num_warps"], num_stages=cfg["num_stages"], PF=pf)
    # ITEM_TABLE: each program reads its (expert, start, end) from the table the v3 / v4 sort writes (one memory
    # round trip instead of three dependent ones before its first weight load; glue v2's sort does not write it)
    if cfg.get("ITEM_TABLE") and glue != "v2":
        launch.update(ITEMS=True, it0=item_table_offset(El))
    # 1. routing lists + act-quant of x
    early = up_early(cfg, dev)                  # config UP_EARLY: None (off, or not compiled sm_90+), "launch", "spec"
    act, start, order, inv, xq, sx = routed if routed is not None else _route(
        x, indices, El, expert_offset, glue, _sort_mode(cfg, T, El), early)
    xq = xq.view(torch.float8_e4m3fn)
    n_items = min(El, TK)                      # the most experts a batch can activate: the grid, no host sync
    fused = hw is not None
    mode = cfg.get("SHARED_ITEMS", "one")
    if mode not in ("one", "per_tile"):
        raise ValueError(f"moe_experts: config SHARED_ITEMS={mode!r}: 'one' or 'per_tile'")
    bms = int(cfg.get("BM_SHARED", bm))            # the shared expert's token tile (its items read all T tokens)
    if bms not in (8, 16, 32, 64):
        raise ValueError(f"moe_experts: config BM_SHARED={bms}: 8, 16, 32 or 64")
    launch.update(BMS=bms)
    sh_scales = cfg.get("SHARED_SCALES", "step")
    if sh_scales not in SHARED_SCALES:
        raise ValueError(f"moe_experts: config SHARED_SCALES={sh_scales!r}: one of {SHARED_SCALES}")
    launch.update(SH_AHEAD=sh_scales == "ahead")     # as SHARED "fused": nothing to act on in a call without one
    nsh = (triton.cdiv(T, bms) if mode == "per_tile" else 1) if fused else 0    # shared expert items
    if fused:
        hw = {k: v.contiguous() for k, v in hw.items()}
        h1, h3, h2 = hw["w1"], hw["w3"], hw["w2"]
        hs1, hs3, hs2 = (hw[k].view(torch.uint8) for k in ("s1", "s3", "s2"))
        launch.update(NS=h1.shape[0])               # the shared expert's inner dimension (a TP slice: < F)
    else:                                           # unused pointers
        h1 = h3 = h2 = hs1 = hs3 = hs2 = xq
    # 2. W1 / W3 over the active (expert, F tile, K split) items (+ the shared expert's items): fp32 partials, or
    #    with EPILOGUE "swiglu" (no K split, BN_UP 128: whole act-quant groups) the W2 input itself (3. skipped)
    aq = torch.empty((ROWS, F), dtype=torch.uint8, device=dev)
    sa = torch.empty((ROWS, F // 128), dtype=torch.float32, device=dev)
    out = torch.empty((T, D), dtype=out_dtype, device=dev)
    epi = cfg.get("EPILOGUE", "partials")
    if epi not in ("partials", "swiglu"):
        raise ValueError(f"moe_experts: config EPILOGUE={epi!r}: 'partials' or 'swiglu'")
    fuse = epi == "swiglu" and su == 1 and bu == 128
    rw = weights.contiguous().view(-1)
    # glue v4: the SwiGLU-quant (unless the up kernel's own EPILOGUE does it) and the combine run inside the GEMM
    # launches (their last programs, FIN). The SwiGLU-quant made instead by each W2 program for its own K split (config
    # FIN_UP "down", session 51) released W2 2.7 us earlier but read the partials again for every N tile: the C = 1
    # step was 0.54 ms slower (H100, session 52, docs/perf/h100-2026-12-07-session52.md), so it was removed.
    fin_up = glue == "v4" and not fuse and 128 % bu == 0
    fin_down = glue == "v4"
    live = _combine_tickets_option(cfg) == "live" and fin_down
    # SHARED_X: where the shared items' act-quantized x comes from: "gate" (the routing launch's xq / sx) or "own"
    # (each shared program quantizes its blocks; with PDL they then run beside the gate: _grouped_gemm_kernel XOWN).
    # Default "own" when the up launch runs under PDL after the score gate (`score_gate`: its GEMV is the latency to
    # hide). H200, moe_layer C = 1, graph replay (data/h200-2026-12-03-session15/call2): score routing 28.71 us own vs
    # 30.17 gate; hash routing (a short gate launch) 23.07 own vs 19.30 gate
    pdl_up = pdl_args(dev, T, *((h1, h3) if fused else ()))
    sxm = cfg.get("SHARED_X", "own" if pdl_up and score_gate else "gate")
    if sxm not in ("gate", "own"):
        raise ValueError(f"moe_experts: config SHARED_X={sxm!r}: 'gate' or 'own'")
    xown = fused and sxm == "own"
    early_pdl = (early and not pdl_up and bulk_rows_ok(w1) and bulk_rows_ok(w3)
                 and (not fused or (bulk_rows_ok(h1) and bulk_rows_ok(h3))))
    if early_pdl:               # config UP_EARLY: a PDL launch beside the routing launch (_grouped_gemm_kernel SPEC)
        pdl_up = {"PDL": True, "launch_pdl": True, "SPEC": early == "spec",
                  "spec_n": _up_early_per_sm(cfg) * sm_count(dev)}
    # with xown the up launch's tickets start past the routing launch's (split_tickets(dev, 1)): its shared items
    # may run beside it
    t0 = XOWN_TICKETS if xown else 0
    tickets = split_tickets(dev, max(t0 + (nsh + n_items) * (F // 128), D // bd)) if fin_up or fin_down else None
    up_tickets = tickets[t0:] if tickets is not None else None
    # the finishing blocks: FIN_ROWS SwiGLU rows (an item has <= T rows) and FIN_TOKENS combine tokens per step; the
    # kernel's registers are the max over its paths, so smaller blocks at small T can leave room for more blocks/SM
    fr, ft = int(cfg.get("FIN_ROWS", 8)), int(cfg.get("FIN_TOKENS", 32))
    if fr & (fr - 1) or ft & (ft - 1) or not (2 <= fr <= 8 and 2 <= ft <= 32):
        raise ValueError(f"moe_experts: config FIN_ROWS={fr} (2..8) and FIN_TOKENS={ft} (2..32) must be powers of 2")
    gu = aq if fuse else torch.empty((su, ROWS, 2 * F), dtype=torch.float32, device=dev)
    # GATE_TAIL "up" (local): one routed program set, which runs the token's chosen local experts in turn (no
    # programs that take the top-k only to find no item of theirs: session 49, H100)
    up_programs = (nsh + (1 if local else n_items)) * (F // bu) * su
    _grouped_gemm_kernel[(up_programs,)](
        xq, sx, act, start, order, w1, s1, w3, s3, gu, h1, hs1, h3, hs3, T, TK, ROWS, nsh, rw, aq, sa,
        float(swiglu_limit), N=F, KD=D, K=K, BM=bm, BN=bu, SPLIT=su, ASM=asm, PAIR=pair, SHARED=fused, GATED=True,
        SWIGLU=fuse, PROMOTE=fp8_promote() if fused else 0, RNE_FIX=INTERPRET, **launch, **_regs(cfg, "MAXNREG_UP"),
        **pdl_up, **trace_args("moe W1/W3", up_programs, dev), **(local or {}),
        **(dict(XOWN=True, xr_ptr=x) if xown else {}), **(dict(cnt_ptr=up_tickets, FIN=True, FR=fr) if fin_up else {}))
    # 3. reduce + SwiGLU + routing weight + act-quant of the W2 input
    NG = F // 128
    if not fuse and not fin_up:
        gpp = NG if glue == "v2" else (1 if ROWS * NG <= 4096 else min(4, NG))     # 128-groups per program
        _swiglu_quant_kernel[(ROWS, triton.cdiv(NG, gpp))](
            gu, rw, order, start, aq, sa, TK, ROWS, El, float(swiglu_limit), F=F, SPLIT=su, GB=min(4, gpp), GPP=gpp,
            RNE_FIX=INTERPRET, num_warps=4, num_stages=1)
    # 4. W2 partials
    yp = torch.empty((sd, ROWS, D), dtype=torch.float32, device=dev)
    if fin_down and join is not None:       # the down launch's finish adds the shared output made beside
        join()
    down_programs = (nsh + n_items) * (D // bd) * sd
    _grouped_gemm_kernel[(down_programs,)](
        aq.view(torch.float8_e4m3fn), sa, act, start, order, w2, s2, w2, s2, yp, h2, hs2, h2, hs2, T, TK, ROWS, nsh,
        rw, aq, sa, 0.0, N=D, KD=F, K=K, BM=bm, BN=bd, SPLIT=sd, ASM=asm, PAIR=pair, SHARED=fused, GATED=False, **launch,
        PROMOTE=fp8_promote() if fused else 0,
        **_regs(cfg, "MAXNREG_DOWN"), **pdl_args(dev, T, *((h2,) if fused else ())),
        **trace_args("moe W2", down_programs, dev),
        **(dict(cnt_ptr=tickets, fin_ptr=out, inv_ptr=inv, extra_ptr=shared if shared is not None else x, FIN=True, FT=ft,
                HAS_EXTRA=shared is not None, OUT_BF16=out_dtype == torch.bfloat16, RNE_FIX=INTERPRET, LIVE=live)
           if fin_down else {}))
    # 5. per-token combine in k order (+ shared expert)
    if not fin_down:
        if join is not None:
            join()
        # v3: at least ~256 programs (C=1: 16 x 256 columns instead of 4 x 1024)
        BLOCK = 1024 if glue == "v2" else min(1024, max(256, triton.next_power_of_2(T * D // 256)))
        _grouped_combine_kernel[(T, triton.cdiv(D, BLOCK))](
            yp, inv, shared if shared is not None else x, out, TK, ROWS, D, K=K, SPLIT=sd, BLOCK=BLOCK,
            HAS_SHARED=shared is not None, SHARED_ROWS=fused, OUT_BF16=out_dtype == torch.bfloat16, RNE_FIX=INTERPRET,
            num_warps=4, num_stages=1)
    return out


XOWN_TICKETS = 64      # the up launch's ticket range starts here when its shared items run beside the routing launch
UP_EARLY_MODES = ("off", "launch", "spec")
# "spec" without UP_EARLY_PER_SM: the up launch's programs resident at once per SM (sm_90: 116 registers x 128
# threads); moe_routed's default names its own count (routed_default)
UP_EARLY_PER_SM = 4


def _up_early_per_sm(cfg) -> int:
    """Config UP_EARLY_PER_SM (1..16, default UP_EARLY_PER_SM): with UP_EARLY "spec", the programs per SM of the
    device (kernels/attention.py sm_count) that prefetch their guessed span: the first ones, resident while the
    routing launch runs."""
    n = int((cfg or {}).get("UP_EARLY_PER_SM", UP_EARLY_PER_SM))
    if not 1 <= n <= 16:
        raise ValueError(f"moe_experts: config UP_EARLY_PER_SM={n}: 1..16")
    return n


def grouped_compiled_only(config: dict) -> str | None:
    """Why a config of the grouped MoE impls runs compiled only beyond inline PTX (verify_paths.compiled_only
    recognises DECODE "fp8_asm" itself): UP_EARLY's PDL launch and bulk prefetch (the interpreter runs the default's
    launches: the same arithmetic, but not that path)."""
    if (config or {}).get("UP_EARLY", "off") != "off":
        return (f"UP_EARLY={config['UP_EARLY']} is a PDL launch with bulk L2 prefetches: it runs compiled only "
                f"(sm_90+; the interpreter runs the default's launches)")
    return None


def up_early(cfg, device) -> str | None:
    """Config UP_EARLY: "off" (the default), "launch" or "spec": where the W1 / W3 launch follows a routing launch
    without PDL (above one token: kernels/common.py PDL_MAX_TOKENS), it starts beside it as a PDL launch whose
    programs wait for it ("launch"), and with "spec" its routed items first prefetch a guessed span of W1 / W3 into
    L2 (_grouped_gemm_kernel SPEC), so that weights stream while the top-k and the slot sort run. Compiled sm_90+
    only (griddepcontrol, bulk prefetch); elsewhere both run the default's launches. The same arithmetic: the same
    result. -> the mode where it applies, else None."""
    mode = (cfg or {}).get("UP_EARLY", "off")
    if mode not in UP_EARLY_MODES:
        raise ValueError(f"moe_experts: config UP_EARLY={mode!r}: one of {', '.join(UP_EARLY_MODES)}")
    return mode if mode != "off" and sm90_compiled(device) else None


# config keys of the grouped kernels that no space or default shows at the ops' cases (Impl.options: a pin or tuned
# entry may name them): register caps and finishing blocks (the defaults set them only with the shared expert
# fused), the X_ONCE / ITEM_TABLE / EPILOGUE variants, the glue (GLUE: "v4" finishes inside the GEMM launches, the
# default up to FIN_MAX_T tokens; "v3" in launches of their own above)
GROUPED_OPTIONS = frozenset({"MAXNREG_UP", "MAXNREG_DOWN", "FIN_ROWS", "FIN_TOKENS", "X_ONCE", "ITEM_TABLE", "EPILOGUE",
                             "GLUE", "GATE_WARPS", "GATE_ROWS", "ROUTE_CH", "ROUTE_WARPS", "ROUTE_SORT", "SHARED_X",
                             "GATE_SPLIT_D", "GATE_MMA_WARPS", "UP_EARLY", "UP_EARLY_PER_SM", "GATE_TAIL",
                             "GATE_TOPK_ROWS", "COMBINE_TICKETS"})
_GROUPED_KERNELS = [_gate_route_kernel, _gate_mma_kernel, _grouped_gemm_kernel, _swiglu_quant_kernel,
                    _grouped_combine_kernel]


def _grouped_key(x, indices, w1):
    return {**_experts_key(x, indices, w1), "kernel": "grouped"}     # tuned entries of triton_v1 do not apply


@register_impl("moe_experts", "triton", backend="triton", configs=grouped_configs, default_config=grouped_default,
               deterministic=True, kernels=lambda: list(_GROUPED_KERNELS), prepare=prepare_experts,
               options=GROUPED_OPTIONS, compiled_only=grouped_compiled_only)
def moe_experts(x, weights, indices, w1, s1, w3, s3, w2, s2, expert_offset, swiglu_limit, shared_w1=None,
                shared_s1=None, shared_w3=None, shared_s3=None, shared_w2=None, shared_s2=None, config=None):
    # shared_*: the TP rank that carries the replicated shared expert adds it here (the decoder, kernelbench/decoder/model.py),
    # inside the routed launches (config SHARED "fused") like moe_layer
    return _experts_grouped(None, x, weights, indices, w1, s1, w3, s3, w2, s2, expert_offset, swiglu_limit,
                            (shared_w1, shared_s1, shared_w3, shared_s3, shared_w2, shared_s2), config)


def _experts_grouped(fixed, x, weights, indices, w1, s1, w3, s3, w2, s2, expert_offset, swiglu_limit, shared, config):
    """moe_experts on the grouped kernels; fixed: a default function used as is (no tuned-table lookup), or None."""
    pair, w1, w3, w2 = _layout(w1, w3, w2)
    _check_experts(x, weights, indices, w1, s1, w3, s3, w2, s2)
    hw = _shared_inputs(*shared)
    key = _grouped_key(x, indices, w1)
    params = {**key, **_shared_params(hw)}
    cfg = config or (fixed(params) if fixed else lookup("moe_experts", key, grouped_default(params)))
    y_side, side = _start_shared_side(x, hw, swiglu_limit, cfg)
    with side or contextlib.nullcontext():          # joined on the way out, an error included
        return _routed_and_shared(x, weights, indices, w1, s1, w3, s3, w2, s2, expert_offset, swiglu_limit, cfg, hw,
                                  torch.float32, pair, y_side=y_side, join=side and side.join)


def _shared_mode(cfg) -> str:
    mode = cfg.get("SHARED", "fused")
    if mode not in SHARED_MODES:
        raise ValueError(f"moe_experts: config SHARED={mode!r}: {', '.join(map(repr, SHARED_MODES))}")
    return mode


def _start_shared_side(x, hw, swiglu_limit, cfg):
    """Config SHARED "side": the shared expert's own launches start now on a side stream (kernels/common.py Beside),
    beside the gate and the routed launches -> (its bf16 output, the Beside to join before the first launch that
    reads it); (None, None) for the other modes or without a shared expert."""
    if hw is None or _shared_mode(cfg) != "side":
        return None, None
    if hw["w2"].dim() != 2 or hw["w2"].shape[0] != x.shape[1]:
        raise ValueError(f"moe_experts: the shared expert's W2 must have D = {x.shape[1]} rows, got "
                         f"{tuple(hw['w2'].shape)}")
    side = Beside(x.device)
    with side.run():
        y = _shared(x, **hw, swiglu_limit=swiglu_limit)
    return y, side


def _routed_and_shared(x, weights, indices, w1, s1, w3, s3, w2, s2, expert_offset, swiglu_limit, cfg, hw, out_dtype,
                       pair, routed=None, score_gate=False, y_side=None, join=None, local=None):
    """The grouped routed experts (+ the shared expert hw, when given: inside the routed launches when SHARED is
    "fused" (the default below SHARED_SIDE_MIN_T tokens) and its sizes fit; with "side" its output y_side, started
    beside them (_start_shared_side), added in the combine after `join`; with "beside" its own launches first, added
    in the combine)."""
    if hw is None:
        return _grouped(x, weights, indices, w1, s1, w3, s3, w2, s2, expert_offset, swiglu_limit, cfg, None,
                        out_dtype, pair, routed=routed, local=local)
    if y_side is not None:
        return _grouped(x, weights, indices, w1, s1, w3, s3, w2, s2, expert_offset, swiglu_limit, cfg, y_side,
                        out_dtype, pair, routed=routed, join=join, local=local)
    mode = _shared_mode(cfg)
    if mode == "fused" and _fusable_shared(hw, x.shape[1], w1.shape[1]):
        return _grouped(x, weights, indices, w1, s1, w3, s3, w2, s2, expert_offset, swiglu_limit, cfg, None,
                        out_dtype, pair, hw, routed=routed, score_gate=score_gate, local=local)
    shared = _shared(x, **hw, swiglu_limit=swiglu_limit)
    return _grouped(x, weights, indices, w1, s1, w3, s3, w2, s2, expert_offset, swiglu_limit, cfg, shared, out_dtype,
                    pair, routed=routed, local=local)


@register_impl("moe_layer", "triton", backend="triton", configs=gated_configs, default_config=layer_default,
               deterministic=True, kernels=lambda: [_topk_kernel, _swiglu_kernel, _gate_fused_kernel, *_GROUPED_KERNELS],
               prepare=prepare_experts, options=GROUPED_OPTIONS, compiled_only=grouped_compiled_only)
def moe_layer(x, weight, bias, tid2eid, token_ids, topk, route_scale, w1, s1, w3, s3, w2, s2, expert_offset,
              swiglu_limit, shared_w1, shared_s1, shared_w3, shared_s3, shared_w2, shared_s2, config=None):
    return _layer_grouped(None, x, weight, bias, tid2eid, token_ids, topk, route_scale, w1, s1, w3, s3, w2, s2,
                          expert_offset, swiglu_limit, shared_w1, shared_s1, shared_w3, shared_s3, shared_w2,
                          shared_s2, config)


def _layer_grouped(fixed, x, weight, bias, tid2eid, token_ids, topk, route_scale, w1, s1, w3, s3, w2, s2,
                   expert_offset, swiglu_limit, shared_w1, shared_s1, shared_w3, shared_s3, shared_w2, shared_s2,
                   config, op: str = "moe_layer"):
    """moe_layer (bf16 out, the shared expert always) and moe_routed (fp32 out, the shared expert when given) on
    the grouped kernels, the gate's top-k and the slot sort in the gate's launch."""
    pair, w1, w3, w2 = _layout(w1, w3, w2)
    hw = _shared_inputs(shared_w1, shared_s1, shared_w3, shared_s3, shared_w2, shared_s2)
    key = {"T": x.shape[0], "D": x.shape[1], "El": w1.shape[0], "F": w1.shape[1], "K": topk, "kernel": "grouped"}
    params = {**key, **_shared_params(hw)}
    cfg = config or (fixed(params) if fixed else layer_config(op, params))
    y_side, side = _start_shared_side(x, hw, swiglu_limit, cfg)     # SHARED "side": beside the gate and W1 / W3
    with side or contextlib.nullcontext():          # joined on the way out, an error included
        return _gate_then_grouped(x, weight, bias, tid2eid, token_ids, topk, route_scale, w1, s1, w3, s3, w2, s2,
                                  expert_offset, swiglu_limit, cfg, hw, pair, op, y_side, side and side.join)


LAYER_KEY = ("T", "D", "El", "F", "K", "kernel")      # moe_layer's / moe_routed's tuned-config key


def layer_config(op: str, params: dict) -> dict:
    """The config moe_layer / moe_routed (`op`) run with none given: the op's tuned entry, else moe_experts' (the same
    grouped kernels: its tuned tiles apply when the op has none of its own), else grouped_default. `params`: the key
    (LAYER_KEY) and the shared expert's (_shared_params). moe_routed's default adds UP_EARLY (routed_default)."""
    key = {k: params[k] for k in LAYER_KEY}
    default = routed_default(params) if op == "moe_routed" else grouped_default(params)
    return lookup(op, key, lookup("moe_experts", key, default))


def _gate_then_grouped(x, weight, bias, tid2eid, token_ids, topk, route_scale, w1, s1, w3, s3, w2, s2, expert_offset,
                       swiglu_limit, cfg, hw, pair, op, y_side, join):
    """_layer_grouped after its config (and the shared expert's output y_side made beside, with its join, when
    SHARED is "side"): the gate's launches, then the grouped kernels."""
    routed = local = None
    T, El = x.shape[0], w1.shape[0]
    tail = _gate_tail(cfg, T, tid2eid is not None)
    if _glue(cfg, T) == "v2":
        w, idx = _gate(x, weight, bias, tid2eid, token_ids, topk, route_scale)
    else:
        mode = _gate_mode(cfg, T)
        if mode == "fused":     # one launch: gate GEMV, top-k, the slot sort, x's act-quant (GATE_TAIL "up": GEMV)
            w, idx, routed, local = _gate_fused(x, weight, bias, tid2eid, token_ids, topk, route_scale,
                                                (El, expert_offset), _gate_warps(cfg),
                                                _sort_mode(cfg, T, El, fused=True), _gate_rows_option(cfg), tail,
                                                _gate_topk_rows(cfg))
        elif mode == "mma":     # one launch: tensor-core logits, top-k, the slot sort, x's act-quant
            w, idx, routed = _gate_mma(x, weight, bias, tid2eid, token_ids, topk, route_scale, El, expert_offset, cfg)
        else:                   # the gate GEMM + one launch: top-k, the slot sort, x's act-quantization
            w, idx, routed = _gate_route(x, weight, bias, tid2eid, token_ids, topk, route_scale, El, expert_offset,
                                         cfg)
    _check_experts(x, w, idx, w1, s1, w3, s3, w2, s2)
    return _routed_and_shared(x, w, idx, w1, s1, w3, s3, w2, s2, expert_offset, swiglu_limit, cfg, hw,
                              torch.bfloat16 if op == "moe_layer" else torch.float32, pair, routed,
                              score_gate=tid2eid is None, y_side=y_side, join=join, local=local)


@register_impl("moe_routed", "triton", backend="triton", configs=gated_configs, default_config=routed_default,
               deterministic=True, kernels=lambda: [_topk_kernel, _swiglu_kernel, _gate_fused_kernel, *_GROUPED_KERNELS],
               prepare=prepare_experts, options=GROUPED_OPTIONS, compiled_only=grouped_compiled_only)
def moe_routed(x, weight, bias, tid2eid, token_ids, topk, route_scale, w1, s1, w3, s3, w2, s2, expert_offset,
               swiglu_limit, shared_w1=None, shared_s1=None, shared_w3=None, shared_s3=None, shared_w2=None,
               shared_s2=None, config=None):
    """The TP decoder's MoE: moe_layer's launches (the gate's top-k, slot sort and x quantization in one launch)
    with the fp32 partial out and the shared expert optional (moe_experts')."""
    return _layer_grouped(None, x, weight, bias, tid2eid, token_ids, topk, route_scale, w1, s1, w3, s3, w2, s2,
                          expert_offset, swiglu_limit, shared_w1, shared_s1, shared_w3, shared_s3, shared_w2,
                          shared_s2, config, op="moe_routed")


@register_impl("moe_routed", "triton_parts", backend="triton", deterministic=True,
               kernels=lambda: [_topk_kernel, _gate_route_kernel, *_GROUPED_KERNELS], prepare=prepare_experts)
def moe_routed_parts(x, weight, bias, tid2eid, token_ids, topk, route_scale, w1, s1, w3, s3, w2, s2, expert_offset,
                     swiglu_limit, shared_w1=None, shared_s1=None, shared_w3=None, shared_s3=None, shared_w2=None,
                     shared_s2=None):
    """moe_routed as the TP decoder ran it before the op existed: moe_gate's launches, then moe_experts' (its own
    slot-sort launch), each on its default; for same-run timing (`--use moe_routed=triton_parts`)."""
    w, idx = moe_gate(x, weight, bias, tid2eid, token_ids, topk, route_scale)
    return moe_experts(x, w, idx, w1, s1, w3, s3, w2, s2, expert_offset, swiglu_limit, shared_w1, shared_s1,
                       shared_w3, shared_s3, shared_w2, shared_s2)


def _register_previous(name: str, fixed, layer_fixed, choices: str) -> None:
    """Impl `name` of moe_experts and moe_layer: the grouped kernels on an earlier default (`fixed`; moe_layer's
    reported default `layer_fixed`), used as is, never a tuned entry, so one bench times it beside today's."""
    def experts(x, weights, indices, w1, s1, w3, s3, w2, s2, expert_offset, swiglu_limit, shared_w1=None,
                shared_s1=None, shared_w3=None, shared_s3=None, shared_w2=None, shared_s2=None, config=None):
        return _experts_grouped(fixed, x, weights, indices, w1, s1, w3, s3, w2, s2, expert_offset, swiglu_limit,
                                (shared_w1, shared_s1, shared_w3, shared_s3, shared_w2, shared_s2), config)

    def layer(x, weight, bias, tid2eid, token_ids, topk, route_scale, w1, s1, w3, s3, w2, s2, expert_offset,
              swiglu_limit, shared_w1, shared_s1, shared_w3, shared_s3, shared_w2, shared_s2, config=None):
        return _layer_grouped(fixed, x, weight, bias, tid2eid, token_ids, topk, route_scale, w1, s1, w3, s3, w2, s2,
                              expert_offset, swiglu_limit, shared_w1, shared_s1, shared_w3, shared_s3, shared_w2,
                              shared_s2, config)

    for fn, op in ((experts, "moe_experts"), (layer, "moe_layer")):
        fn.__name__ = fn.__qualname__ = f"{op}_{name}"
        fn.__doc__ = f"{op} with {choices}"
    common = dict(backend="triton", deterministic=True, prepare=prepare_experts, options=GROUPED_OPTIONS)
    register_impl("moe_experts", name, default_config=fixed, kernels=lambda: list(_GROUPED_KERNELS), **common)(experts)
    register_impl("moe_layer", name, default_config=layer_fixed,
                  kernels=lambda: [_topk_kernel, _swiglu_kernel, *_GROUPED_KERNELS], **common)(layer)


_register_previous("triton_v2", grouped_default_v2, grouped_default_v2, "the session-3 choices (grouped_default_v2)")
def previous_default_v3(params: dict) -> dict:
    """Impl triton_v3's config: the session-4 choices with FIN_ROWS 4 at T <= 2. The 8-way split W1/W3 launch's
    finishing block of 8 rows (glue v4, which came after session 4) spilled 32 B on sm_120 with the shared expert
    fused (kernelbench inspect --target sm_120, moe_layer triton_v3 at C = 1, session 18); 4 rows do not."""
    cfg = grouped_default_v3(params)
    return {**cfg, "FIN_ROWS": 4} if params["T"] <= 2 else cfg


def previous_default_v4(params: dict) -> dict:
    """Impl triton_v4's config: the session-5 choices without their MAXNREG_DOWN 80 (the capped down kernel spilled
    32 B on sm_120 with the shared expert fused, moe_layer triton_v4 at C = 16 and 64, session 18; on the H200 the cap
    had gained 1.6% / 0.2%). Later defaults build on grouped_default_v4 unchanged."""
    cfg = grouped_default_v4(params)
    cfg.pop("MAXNREG_DOWN", None)
    return cfg


def previous_layer_default_v4(params: dict) -> dict:
    return previous_default_v4({**params, "shared": True})


_register_previous("triton_v3", previous_default_v3, previous_default_v3,
                   "the session-4 choices (grouped_default_v3; FIN_ROWS 4 at T <= 2 for sm_120)")
_register_previous("triton_v4", previous_default_v4, previous_layer_default_v4,
                   "the session-5 choices (grouped_default_v4: one scale group per dot, BM 16; no register cap)")
_register_previous("triton_v5", grouped_default_v5, layer_default_v5,
                   "the session-15 choices (grouped_default_v5: the shared expert inside the routed launches at every T)")


# ---- the previous glue, kept for same-run comparison (impls triton_glue2 / triton_glue3 = config GLUE "v2" / "v3") --
# v2: separate _topk_kernel, serial slot sort in _route_kernel, SwiGLU-quant one program per row, combine 1024-column
# programs (7 launches for moe_layer); v3: _gate_route_kernel, SwiGLU-quant and combine launches with wider grids (6)
# Glue v4 (FIN) by default up to this many tokens, v3 above. H200 (docs/perf/moe.md "Glue v4"): moe_layer at C=1 34.8
# us (v4) vs 43.9 (v2), graph replay; at C=64 the finishing tails slowed the up / down GEMMs by 23 / 11 us under ncu,
# more than the two launches they remove.
FIN_MAX_T = 4


COMBINE_TICKETS = ("all", "live")


def _combine_tickets_option(cfg) -> str:
    """Config COMBINE_TICKETS (glue v4's W2 launch): who takes an N tile's combine ticket. "live" (the default since
    session 53): only the programs of the items with work. "all": every program, the idle items' too (the grid holds
    the most items a batch can activate, min(El, T * K)). Session 52's one-token timeline (H100, moe_routed, one
    routed expert active): 1,280 of the 1,792 W2 programs were idle, scheduled only as the working ones left, and with
    "all" the last ticket, hence the combine, came 2.5 us after the last GEMM finished. Session 53 (H100,
    data/h100-2026-12-07-session53/call1): moe_routed's call period 24.38 -> 22.11 us (scripts/moe_timeline.py, one
    token), the 43-layer step at C = 1 0.031 ms faster (decode-bench --try, 30 pairs, 95% interval +0.026 .. +0.037;
    A/A -0.005 .. +0.006); bit-equal (tests/test_moe.py, CPU and GPU)."""
    who = (cfg or {}).get("COMBINE_TICKETS", "live")
    if who not in COMBINE_TICKETS:
        raise ValueError(f"moe_experts: config COMBINE_TICKETS={who!r}: 'all' or 'live'")
    return who


def _glue(cfg, T: int = 1) -> str:
    glue = (cfg or {}).get("GLUE", "v4" if T <= FIN_MAX_T else "v3")
    if glue not in ("v2", "v3", "v4"):
        raise ValueError(f"moe_experts: config GLUE={glue!r}: 'v4', 'v3' or 'v2' (default: v4 up to "
                         f"{FIN_MAX_T} tokens, v3 above)")
    return glue


def _register_glue(glue: str) -> None:
    route = [_route_kernel] if glue == "v2" else [_gate_route_kernel]

    def experts(x, weights, indices, w1, s1, w3, s3, w2, s2, expert_offset, swiglu_limit, shared_w1=None,
                shared_s1=None, shared_w3=None, shared_s3=None, shared_w2=None, shared_s2=None, config=None):
        key = _grouped_key(x, indices, w1)
        cfg = {**(config or lookup("moe_experts", key, grouped_default(key))), "GLUE": glue}
        return moe_experts(x, weights, indices, w1, s1, w3, s3, w2, s2, expert_offset, swiglu_limit, shared_w1,
                           shared_s1, shared_w3, shared_s3, shared_w2, shared_s2, config=cfg)

    def layer(x, weight, bias, tid2eid, token_ids, topk, route_scale, w1, s1, w3, s3, w2, s2, expert_offset,
              swiglu_limit, shared_w1, shared_s1, shared_w3, shared_s3, shared_w2, shared_s2, config=None):
        key = {"T": x.shape[0], "D": x.shape[1], "El": w1.shape[0], "F": w1.shape[1], "K": topk, "kernel": "grouped"}
        cfg = {**(config or lookup("moe_layer", key, lookup("moe_experts", key, layer_default(key)))), "GLUE": glue}
        return moe_layer(x, weight, bias, tid2eid, token_ids, topk, route_scale, w1, s1, w3, s3, w2, s2, expert_offset,
                         swiglu_limit, shared_w1, shared_s1, shared_w3, shared_s3, shared_w2, shared_s2, config=cfg)

    kernels = [*route, _grouped_gemm_kernel, _swiglu_quant_kernel, _grouped_combine_kernel]
    register_impl("moe_experts", f"triton_glue{glue[1:]}", backend="triton", default_config=grouped_default,
                  deterministic=True, kernels=lambda: list(kernels), prepare=prepare_experts,
                  options=GROUPED_OPTIONS)(experts)
    register_impl("moe_layer", f"triton_glue{glue[1:]}", backend="triton", default_config=layer_default,
                  deterministic=True, kernels=lambda: [_topk_kernel, _swiglu_kernel, *kernels],
                  prepare=prepare_experts, options=GROUPED_OPTIONS)(layer)


for _g in ("v2", "v3"):
    _register_glue(_g)
