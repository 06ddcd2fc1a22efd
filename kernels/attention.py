"""Sparse MQA decode attention with a sink (SPEC 3.4): flash-decoding over the selected entries.

Legend: T tokens, B sequences, N cache entries per sequence, Hl heads per rank, Dh = 512 head dim
(K = V = the whole entry), R rope dims, Ksel selected entries per token, S splits of Ksel,
BH heads per program (>= 16, the MMA minimum: 8 local heads are padded to 16, never to 64),
BN entries per block.

Impl "triton_fused" is ONE launch, `_attn_fused` grid (T, S, ceil(Hl/BH)): the split program of step 1
below stores its partial and (m, l), takes a ticket from a per-(token, head block) counter (the split-K
tickets of kernels/linear.py: zero between launches, re-armed by the kernel, no memset), and the last
program to arrive joins the S partials as step 2 does (`_attn_join`: FIN_H heads of every split loaded at
once, one reduction over the splits whose order does not depend on arrival: deterministic), then the sink,
the bf16 rounding, the inverse RoPE and the second rounding (`_attn_store`). S is capped by the config's
SPLITS (the join reads S partials). Measured slower than the two launches on the H200 (docs/perf/attention.md).
Impl "triton": two launches, both graph-capturable (no host reads of device data):
  1. `_attn_split` grid (T, S, ceil(Hl/BH)): one program owns BH heads of one token and a slice of
     its index list (with lengths[t] given, the token's valid prefix is spread over the splits on the
     device, so HCA rows that are Ncap wide but mostly -1 cost what their valid prefix costs; an empty
     split writes only its (m, l), and the combine skips it); it gathers BN entries at a time ([BN, Dh] bf16, one read of each selected row),
     scores them with one tensor-core dot (q [BH, Dh] x kv^T), runs the online softmax in base 2
     (masked -1 entries score -inf), and accumulates p @ kv (second tensor-core dot, the same tile
     as V). It writes an fp32 partial output and its (max, sum) pair.
  2. `_attn_combine` grid (T, Hl): the fused impl's join (`_attn_join`) for one head: loads the S partials
     at once, merges them with the sink in the denominator only, rounds to bf16, applies the inverse RoPE
     to the last R dims in fp32 (fused) and rounds again (DeepSeek's two roundings: its sparse_attn returns
     bf16, model.py rotates that).
The weights p are rounded to bf16 for p @ kv and summed in fp32, as DeepSeek's kernel (docs/OPS.md
'Sparse attention arithmetic'); its blocks of 64 with one running max are not followed (BN and the
splits are tuned), so the weights' rounding agrees with the reference's to rounding, not bit for bit.
Shared memory per split program ~ BN*Dh*2 (the gathered tile) + BH*Dh*2 (q) per stage; the shipped
configs are checked against sm_120's 101,376 bytes by tests/test_attention.py.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernelbench.kernels.common import (INTERPRET, check_device, check_dtype, check_shape, dot_operand,
                                       l2_prefetch_rows, pdl_args, pdl_enter, sincos, to_bf16)
from kernelbench.kernels.linear import (check_wo_a_scale, fp8_codes_exact, grouped_wo_a, prepare_wo_a, scale_args,
                                       split_tickets, splitk_store)
from kernelbench.reference.attention import check_attention_wo_a, check_sparse_attention
from kernelbench.registry import register_impl
from kernelbench.tuned_configs import lookup

LOG2E = 1.4426950408889634


# config space ----------------------------------------------------------------------------------
def attention_configs(params: dict) -> list[dict]:
    """The tuning space: entries per block, heads per program, warps, pipeline stages, and how many
    programs (x SM count) the split over Ksel aims for."""
    hl = params.get("Hl", 8)
    bhs = [16] if hl <= 16 else [16, 32]
    out = []
    for bh in bhs:
        for bn, warps in ((16, 4), (32, 4), (32, 8), (64, 4)):   # (64, 8) needs 114,688 B on sm_120
            if bh == 32 and bn == 64:
                continue
            for stages in (1, 2):
                for waves in (1, 2, 4):
                    out.append({"BLOCK_H": bh, "BLOCK_N": bn, "num_warps": warps, "num_stages": stages,
                                "waves": waves})
    return out


def attention_default(params: dict) -> dict:
    return {"BLOCK_H": 16, "BLOCK_N": 32, "num_warps": 4, "num_stages": 2, "waves": 2}


@triton.jit
def _attn_block(q, kt, valid, m_i, l_i, acc, qk_scale, DOT_UPCAST: tl.constexpr):
    """One block of the online softmax: kt (BN, Dh) bf16 gathered rows, valid (BN,) -> (m_i, l_i, acc)."""
    k_op = dot_operand(kt, DOT_UPCAST)
    s = tl.dot(q, tl.trans(k_op)) * qk_scale                               # (BH, BN) fp32, base-2 logits
    s = tl.where(valid[None, :], s, float("-inf"))
    m_new = tl.maximum(m_i, tl.max(s, axis=1))
    m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
    alpha = tl.exp2(m_i - m_safe)
    p = tl.exp2(s - m_safe[:, None])
    l_i = l_i * alpha + tl.sum(p, axis=1)
    # p rounded to bf16 (RNE, also in the interpreter) for p @ kv, as DeepSeek's kernel; l_i keeps fp32 p
    acc = acc * alpha[:, None] + tl.dot(dot_operand(to_bf16(p, DOT_UPCAST), DOT_UPCAST), k_op)
    return m_new, l_i, acc


@triton.jit
def _fp8_kv_rows(kc_base, kr_base, ke_base, rows, valid, s_cn, s_rn, s_en, DH: tl.constexpr, NOPE: tl.constexpr,
                 BN: tl.constexpr, GROUP: tl.constexpr):
    """Gathered cache rows (BN, DH) bf16 from the FP8 form (`pack_fp8_kv`): dims < NOPE are e4m3 codes times 2^(e -
    127) of their GROUP-dim group's exponent byte e, the last GROUP (when NOPE < DH) the bf16 rope dims, loaded as a
    (BN, GROUP) tile and put in place as the last group (a full-width masked bf16 load would take a (BN, DH) tile of
    shared memory a pipeline stage). Exactly the bf16 entries they were packed from (an e4m3 code times a power of
    two is a bf16 value); invalid rows 0."""
    d = tl.arange(0, DH)
    code = tl.load(kc_base + rows[:, None] * s_cn + d[None, :], mask=valid[:, None] & (d < NOPE)[None, :], other=0.0)
    grp = tl.arange(0, DH // GROUP)
    e = tl.load(ke_base + rows[:, None] * s_en + grp[None, :], mask=valid[:, None], other=127)
    two_e = (e.to(tl.int32) << 23).to(tl.float32, bitcast=True)                   # 2^(e - 127), e in 1..254
    v = tl.reshape(code.to(tl.float32), [BN, DH // GROUP, GROUP]) * two_e[:, :, None]
    if NOPE < DH:
        rope = tl.load(kr_base + rows[:, None] * s_rn + tl.arange(0, GROUP)[None, :], mask=valid[:, None], other=0.0)
        v = tl.where((grp >= NOPE // GROUP)[None, :, None], rope.to(tl.float32)[:, None, :], v)
    return tl.reshape(v, [BN, DH]).to(tl.bfloat16)


@triton.jit
def _attn_partial(q_ptr, kv_ptr, seq_ptr, idx_ptr, len_ptr, t, sp, offs_h, hmask, KSEL, PER_SPLIT, NSPLIT, qk_scale,
                  s_qt, s_qh, s_kb, s_kn, s_it,
                  DH: tl.constexpr, BLOCK_H: tl.constexpr, BLOCK_N: tl.constexpr, DOT_UPCAST: tl.constexpr,
                  HAS_LEN: tl.constexpr, PREFETCH: tl.constexpr, KV_FP8: tl.constexpr = False,
                  NOPE: tl.constexpr = 0, GROUP: tl.constexpr = 0, kr_ptr=None, ke_ptr=None, s_rb=0, s_rn=0, s_eb=0, s_en=0):
    """Split `sp` of token t for the heads offs_h: the online softmax over its slice of the index row.
    KV_FP8 (impl triton_fp8kv, not with PREFETCH): the cache as `pack_fp8_kv` stores it, kv_ptr the e4m3 codes of
    the first NOPE dims, kr_ptr the bf16 rope dims, ke_ptr a UE8M0 exponent byte per GROUP dims (`_fp8_kv_rows`).
    -> (acc [BH, Dh] fp32 unnormalized, running max m [BH] (base 2), sum l [BH], whether the slice is non-empty)."""
    offs_d = tl.arange(0, DH)
    q = tl.load(q_ptr + t * s_qt + offs_h[:, None] * s_qh + offs_d[None, :], mask=hmask[:, None], other=0.0)
    q = dot_operand(q, DOT_UPCAST)                                         # (BH, Dh)
    seq = tl.load(seq_ptr + t).to(tl.int64)
    kv_base = kv_ptr + seq * s_kb
    m_i = tl.full([BLOCK_H], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_H], tl.float32)
    acc = tl.zeros([BLOCK_H, DH], tl.float32)
    if HAS_LEN:
        # columns >= lengths[t] are never read, and the token's valid prefix is spread evenly over the
        # splits (whole BN blocks each), so the work follows lengths[t], not the index width (HCA rows
        # are Ncap wide, mostly -1; measured before this: 7.1 -> 20.0 us from capacity 0 to 8192 on the H200)
        ln = tl.minimum(tl.load(len_ptr + t).to(tl.int32), KSEL)
        per = tl.cdiv(tl.cdiv(ln, BLOCK_N), NSPLIT) * BLOCK_N
        start = sp * per
        end = tl.minimum(start + per, ln)
    else:
        start = sp * PER_SPLIT
        end = tl.minimum(start + PER_SPLIT, KSEL)
    if PREFETCH:
        # the gather one block ahead in registers (its index row two ahead): block i+1's rows are in flight
        # while block i is multiplied (the compiler's pipeliner does not multi-buffer this indirect load)
        offs_n = start + tl.arange(0, BLOCK_N)
        idx = tl.load(idx_ptr + t * s_it + offs_n, mask=offs_n < end, other=-1)
        nxt = tl.load(idx_ptr + t * s_it + offs_n + BLOCK_N, mask=offs_n + BLOCK_N < end, other=-1)
        valid = idx >= 0
        kt = tl.load(kv_base + tl.where(valid, idx, 0).to(tl.int64)[:, None] * s_kn + offs_d[None, :],
                     mask=valid[:, None], other=0.0)
        for n0 in range(start, end, BLOCK_N):
            offs_n = n0 + 2 * BLOCK_N + tl.arange(0, BLOCK_N)
            nxt2 = tl.load(idx_ptr + t * s_it + offs_n, mask=offs_n < end, other=-1)
            v_nxt = nxt >= 0
            kt_nxt = tl.load(kv_base + tl.where(v_nxt, nxt, 0).to(tl.int64)[:, None] * s_kn + offs_d[None, :],
                             mask=v_nxt[:, None], other=0.0)
            m_i, l_i, acc = _attn_block(q, kt, valid, m_i, l_i, acc, qk_scale, DOT_UPCAST)
            kt = kt_nxt
            valid = v_nxt
            nxt = nxt2
    else:
        for n0 in range(start, end, BLOCK_N):                             # splits own whole BN blocks
            offs_n = n0 + tl.arange(0, BLOCK_N)
            idx = tl.load(idx_ptr + t * s_it + offs_n, mask=offs_n < end, other=-1)
            valid = idx >= 0
            rows = tl.where(valid, idx, 0).to(tl.int64)
            if KV_FP8:
                kt = _fp8_kv_rows(kv_base, kr_ptr + seq * s_rb, ke_ptr + seq * s_eb, rows, valid, s_kn, s_rn, s_en,
                                  DH, NOPE, BLOCK_N, GROUP)
            else:
                kt = tl.load(kv_base + rows[:, None] * s_kn + offs_d[None, :], mask=valid[:, None], other=0.0)
            m_i, l_i, acc = _attn_block(q, kt, valid, m_i, l_i, acc, qk_scale, DOT_UPCAST)
    return acc, m_i, l_i, end > start


@triton.jit
def _attn_split(q_ptr, kv_ptr, seq_ptr, idx_ptr, len_ptr, po_ptr, pml_ptr,   # q (T, Hl, Dh) bf16; kv (B, N, Dh)
                HL, KSEL, PER_SPLIT, NSPLIT, qk_scale,                # qk_scale = scale * log2(e)
                s_qt, s_qh, s_kb, s_kn, s_it,
                DH: tl.constexpr, BLOCK_H: tl.constexpr, BLOCK_N: tl.constexpr, DOT_UPCAST: tl.constexpr,
                HAS_LEN: tl.constexpr, PREFETCH: tl.constexpr, PDL: tl.constexpr = False,
                KV_FP8: tl.constexpr = False, NOPE: tl.constexpr = 0, GROUP: tl.constexpr = 0, kr_ptr=None,
                ke_ptr=None, s_rb=0, s_rn=0, s_eb=0, s_en=0):
    pdl_enter(PDL)                                    # q, kv and the indices are all the step's: the wait first
    t = tl.program_id(0)
    sp = tl.program_id(1)
    hb = tl.program_id(2)
    offs_h = hb * BLOCK_H + tl.arange(0, BLOCK_H)
    offs_d = tl.arange(0, DH)
    hmask = offs_h < HL
    acc, m_i, l_i, nonempty = _attn_partial(q_ptr, kv_ptr, seq_ptr, idx_ptr, len_ptr, t, sp, offs_h, hmask, KSEL,
                                            PER_SPLIT, NSPLIT, qk_scale, s_qt, s_qh, s_kb, s_kn, s_it,
                                            DH, BLOCK_H, BLOCK_N, DOT_UPCAST, HAS_LEN, PREFETCH, KV_FP8, NOPE,
                                            GROUP, kr_ptr, ke_ptr, s_rb, s_rn, s_eb, s_en)
    row = (t * NSPLIT + sp) * HL + offs_h                                  # partials (T, S, Hl, ...)
    if nonempty:                                                           # an empty split writes only (m, l)
        tl.store(po_ptr + row[:, None].to(tl.int64) * DH + offs_d[None, :], acc, mask=hmask[:, None])
    tl.store(pml_ptr + row * 2, m_i, mask=hmask)
    tl.store(pml_ptr + row * 2 + 1, l_i, mask=hmask)


@triton.jit
def _attn_combine(po_ptr, pml_ptr, sink_ptr, pos_ptr, freqs_ptr, o_ptr,   # o (T, Hl, Dh) bf16
                  HL, NSPLIT, s_ot, s_oh,
                  DH: tl.constexpr, R: tl.constexpr, S_P2: tl.constexpr, ROPE: tl.constexpr,
                  RNE_FIX: tl.constexpr, DC: tl.constexpr, PDL: tl.constexpr = False):
    """Program (t, h, column block): the join of impl "triton_fused" (`_attn_join`) for DC of one head's Dh columns
    (DC = Dh: all of them, one program a head): every split's partial loaded at once, one memory round trip (the loop
    over the splits it replaces made two dependent loads a split: 5.7-8.3 us under Nsight Compute at T = 1 on the
    H200, session 20)."""
    pdl_enter(PDL)
    c0 = 0
    if DC < DH:                 # a whole head's program has no column offset to compute
        c0 = tl.program_id(2) * DC
    _attn_join(po_ptr, pml_ptr, sink_ptr, pos_ptr, freqs_ptr, o_ptr, tl.program_id(0), tl.program_id(1), c0, HL,
               NSPLIT, s_ot, s_oh, DH, DC, R, 1, 1, S_P2, ROPE, RNE_FIX)


@triton.jit
def _joined(tot, denom, t, c0, pos_ptr, freqs_ptr, DH: tl.constexpr, R: tl.constexpr, FH: tl.constexpr,
            BK: tl.constexpr, ROPE: tl.constexpr, RNE_FIX: tl.constexpr):
    """Columns c0 .. c0 + BK of FH heads' joined output before its last bf16 rounding: tot / denom (tot (FH, BK),
    denom (FH,), fp32); with ROPE rounded to bf16 and the last R of the Dh dims inversely rotated in fp32 (DeepSeek's
    sparse_attn returns bf16, model.py rotates that: the caller's to_bf16 is the second rounding). The one arithmetic
    of the combine (c0 0, BK Dh: _attn_store) and of sparse_attention_wo_a's join inside wo_a's GEMV (a column
    block: _attn_wo_a_kernel). -> (FH, BK) fp32."""
    o = tot / denom[:, None]
    if ROPE:
        o = to_bf16(o, RNE_FIX).to(tl.float32)
        even, odd = tl.split(tl.reshape(o, [FH, BK // 2, 2]))            # pair j = dims (c0 + 2j, c0 + 2j + 1)
        fi = tl.arange(0, BK // 2) + (c0 // 2 - (DH - R) // 2)
        is_rope = fi >= 0
        f = tl.load(freqs_ptr + tl.where(is_rope, fi, 0), mask=is_rope, other=0.0)
        sn, c = sincos(tl.load(pos_ptr + t).to(tl.float32) * f)          # fp32 angle, as the reference
        e2 = even * c[None, :] + odd * sn[None, :]                         # (e + i o) * e^{-i ang}
        o2 = odd * c[None, :] - even * sn[None, :]
        even = tl.where(is_rope[None, :], e2, even)
        odd = tl.where(is_rope[None, :], o2, odd)
        o = tl.reshape(tl.join(even, odd), [FH, BK])
    return o


@triton.jit
def _attn_store(tot, denom, t, c0, offs_h, hmask, pos_ptr, freqs_ptr, o_ptr, s_ot, s_oh,
                DH: tl.constexpr, DC: tl.constexpr, R: tl.constexpr, FH: tl.constexpr, ROPE: tl.constexpr,
                RNE_FIX: tl.constexpr):
    """o[t, offs_h, c0 .. c0 + DC] = tot / denom (FH rows of DC columns, fp32) in bf16, with ROPE rotated
    (`_joined`)."""
    o = _joined(tot, denom, t, c0, pos_ptr, freqs_ptr, DH, R, FH, DC, ROPE, RNE_FIX)
    out = o_ptr + t * s_ot + offs_h[:, None] * s_oh + c0 + tl.arange(0, DC)[None, :]
    tl.store(out, to_bf16(o, RNE_FIX), mask=hmask[:, None])


@triton.jit
def _split_weights(pml_ptr, sink_ptr, rows, mk, offs_h, hmask):
    """The splits' share of FH heads' output: (m, l) of rows (S, FH) of the partials (mk: the rows that exist) and
    the heads' sinks (base e, scaled here to base 2) -> (exp2(m_s - m) (S, FH), the denominator with the sink's share
    (FH,), the rows a split wrote a partial for (l > 0): an empty split wrote only (m, l))."""
    m_s = tl.load(pml_ptr + rows * 2, mask=mk, other=float("-inf"), cache_modifier=".cg")
    l_s = tl.load(pml_ptr + rows * 2 + 1, mask=mk, other=0.0, cache_modifier=".cg")
    sink = tl.load(sink_ptr + offs_h, mask=hmask, other=0.0) * 1.4426950408889634
    m = tl.maximum(tl.max(m_s, axis=0), sink)                          # finite: the sink is
    w_s = tl.exp2(m_s - m[None, :])
    denom = tl.sum(w_s * l_s, axis=0) + tl.exp2(sink - m)
    return w_s, denom, mk & (l_s > 0)


@triton.jit
def _split_sum(po_ptr, rows, live, w_s, offs_d, DH: tl.constexpr):
    """Columns offs_d of the partials at rows (S, FH) (the `live` ones; L2 reads bypassing L1), weighted by w_s and
    summed over the splits in one reduction whose order does not depend on arrival -> (FH, len(offs_d)) fp32."""
    part = tl.load(po_ptr + rows[:, :, None].to(tl.int64) * DH + offs_d[None, None, :], mask=live[:, :, None],
                   other=0.0, cache_modifier=".cg")
    return tl.sum(w_s[:, :, None] * part, axis=0)


@triton.jit
def _attn_join(po_ptr, pml_ptr, sink_ptr, pos_ptr, freqs_ptr, o_ptr, t, hb, c0, HL, NSPLIT, s_ot, s_oh,
               DH: tl.constexpr, DC: tl.constexpr, R: tl.constexpr, BLOCK_H: tl.constexpr, FIN_H: tl.constexpr,
               S_P2: tl.constexpr, ROPE: tl.constexpr, RNE_FIX: tl.constexpr):
    """Merge the NSPLIT partials of (token t, head block hb) in columns c0 .. c0 + DC, FIN_H heads at a time: every
    split's partial of those heads is loaded at once ([S, FIN_H, DC], L2 reads bypassing L1) and summed over the
    splits by one reduction whose order does not depend on which program arrived last (deterministic). The sink
    enters the denominator only; splits with l = 0 wrote no partial and are masked."""
    offs_s = tl.arange(0, S_P2)
    smask = offs_s < NSPLIT
    offs_d = c0 + tl.arange(0, DC)
    for h0 in tl.static_range(0, BLOCK_H, FIN_H):
        if hb * BLOCK_H + h0 < HL:
            offs_h = hb * BLOCK_H + h0 + tl.arange(0, FIN_H)
            hmask = offs_h < HL
            rows = (t * NSPLIT + offs_s[:, None]) * HL + offs_h[None, :]        # (S, FH) rows of (T, S, Hl)
            w_s, denom, live = _split_weights(pml_ptr, sink_ptr, rows, smask[:, None] & hmask[None, :], offs_h,
                                              hmask)
            tot = _split_sum(po_ptr, rows, live, w_s, offs_d, DH)              # (FH, DC)
            _attn_store(tot, denom, t, c0, offs_h, hmask, pos_ptr, freqs_ptr, o_ptr, s_ot, s_oh, DH, DC, R, FIN_H,
                        ROPE, RNE_FIX)


@triton.jit
def _attn_fused(q_ptr, kv_ptr, seq_ptr, idx_ptr, len_ptr, po_ptr, pml_ptr, cnt_ptr,   # cnt: (T, HB) int32 tickets
                sink_ptr, pos_ptr, freqs_ptr, o_ptr,
                HL, KSEL, PER_SPLIT, NSPLIT, qk_scale,
                s_qt, s_qh, s_kb, s_kn, s_it, s_ot, s_oh,
                DH: tl.constexpr, BLOCK_H: tl.constexpr, BLOCK_N: tl.constexpr, DOT_UPCAST: tl.constexpr,
                HAS_LEN: tl.constexpr, R: tl.constexpr, FIN_H: tl.constexpr, S_P2: tl.constexpr,
                ROPE: tl.constexpr, RNE_FIX: tl.constexpr, PREFETCH: tl.constexpr):
    """One launch, grid (T, S, HB): the split of _attn_split, its partial's store and a ticket; the last
    program of (t, hb) to arrive merges the S partials (_attn_join) and writes o (S = 1 included: one path)."""
    t = tl.program_id(0)
    sp = tl.program_id(1)
    hb = tl.program_id(2)
    offs_h = hb * BLOCK_H + tl.arange(0, BLOCK_H)
    hmask = offs_h < HL
    acc, m_i, l_i, nonempty = _attn_partial(q_ptr, kv_ptr, seq_ptr, idx_ptr, len_ptr, t, sp, offs_h, hmask, KSEL,
                                            PER_SPLIT, NSPLIT, qk_scale, s_qt, s_qh, s_kb, s_kn, s_it,
                                            DH, BLOCK_H, BLOCK_N, DOT_UPCAST, HAS_LEN, PREFETCH)
    row = (t * NSPLIT + sp) * HL + offs_h                                  # partials (T, S, Hl, ...)
    if nonempty:                                                           # an empty split writes only (m, l)
        tl.store(po_ptr + row[:, None].to(tl.int64) * DH + tl.arange(0, DH)[None, :], acc, mask=hmask[:, None])
    tl.store(pml_ptr + row * 2, m_i, mask=hmask)
    tl.store(pml_ptr + row * 2 + 1, l_i, mask=hmask)
    tl.debug_barrier()                                                     # every thread's stores before the release
    ticket = cnt_ptr + t * tl.num_programs(2) + hb
    if tl.atomic_add(ticket, 1, sem="acq_rel", scope="gpu") == NSPLIT - 1:
        _attn_join(po_ptr, pml_ptr, sink_ptr, pos_ptr, freqs_ptr, o_ptr, t, hb, 0, HL, NSPLIT, s_ot, s_oh,
                   DH, DH, R, BLOCK_H, FIN_H, S_P2, ROPE, RNE_FIX)
        tl.atomic_xchg(ticket, 0, sem="relaxed", scope="gpu")             # zero again for the next launch


_SM_COUNT: dict = {}


@triton.jit
def _attn_wo_a_kernel(po_ptr, pml_ptr, sink_ptr, pos_ptr, freqs_ptr, w_ptr, z_ptr, part_ptr, cnt_ptr,
                      HL, HG, G, NSPLIT, O, swg, swn, szt, szg, PART_STRIDE,
                      DH: tl.constexpr, R: tl.constexpr, S_P2: tl.constexpr, SPAN: tl.constexpr, BN: tl.constexpr,
                      BK: tl.constexpr, SPLIT: tl.constexpr, ROPE: tl.constexpr, RNE_FIX: tl.constexpr,
                      PDL: tl.constexpr = False, ws_ptr=None, ssg=0, ssn=0, W_FP8: tl.constexpr = False):
    """sparse_attention_wo_a's second launch (after `_attn_split`): z[t, g, rn] = sum over this program's SPAN
    columns k of wo_a[g, rn, k] * o[t, g, k], where o is joined from the split partials right here with the
    combine's own helpers (`_split_weights`, `_split_sum` for a head block of one, `_joined`'s roundings and RoPE): o
    never goes to memory and the combine launch is gone. Program (N tile, K split, t * G + g); a split's SPAN columns lie in one head (h = g * HG +
    k0 // DH), so each program reads that head's S (m, l) pairs and S x SPAN partials (L2: every N tile of the split
    reads the same block). The weight's row block goes to L2 before the PDL wait; fp32 FMA GEMV (bf16 products are
    exact); K splits summed in split order by the last program of the tile (`splitk_store`). W_FP8: wo_a as e4m3
    codes with fp32 power-of-two block scales ws[g, n // BK, k // BK] (kernels/linear.py prepare_wo_a), each BK
    block's sum scaled after it: the bf16 weight's products, bit for bit."""
    pid_n, pid_s, pid_tg = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    t = pid_tg // G
    g = pid_tg % G
    rn = pid_n * BN + tl.arange(0, BN)
    nmask = rn < O
    k0 = pid_s * SPAN                                      # within the group's HG * DH columns
    esz: tl.constexpr = 1 if W_FP8 else 2
    l2_prefetch_rows(w_ptr + g * swg, rn, nmask, esz * swn, esz * k0, esz * SPAN, PDL)
    pdl_enter(PDL)
    h = g * HG + k0 // DH + tl.arange(0, 1)               # the split's head, as a block of one (FH = 1)
    d0 = k0 % DH
    offs_s = tl.arange(0, S_P2)
    rows = (t * NSPLIT + offs_s[:, None]) * HL + h[None, :]   # (S, 1) rows of the partials (T, S, Hl, ...)
    w_s, denom, live = _split_weights(pml_ptr, sink_ptr, rows, (offs_s < NSPLIT)[:, None], h, h < HL)
    acc = tl.zeros((BN,), dtype=tl.float32)
    rk = tl.arange(0, BK)
    for c in tl.static_range(0, SPAN, BK):
        w = tl.load(w_ptr + g * swg + rn[:, None] * swn + (k0 + c + rk)[None, :], mask=nmask[:, None], other=0.0)
        tot = _split_sum(po_ptr, rows, live, w_s, d0 + c + rk, DH)                   # (1, BK)
        xv = to_bf16(_joined(tot, denom, t, d0 + c, pos_ptr, freqs_ptr, DH, R, 1, BK, ROPE, RNE_FIX),
                     RNE_FIX).to(tl.float32)                                         # (1, BK): the combine's bf16
        if W_FP8:
            s = tl.load(ws_ptr + g * ssg + (rn // BK) * ssn + (k0 + c) // BK, mask=nmask, other=0.0)
            acc += tl.sum(w.to(tl.float32) * xv, axis=1) * s
        else:
            acc += tl.sum(w.to(tl.float32) * xv, axis=1)
    ooff = t * szt + g * szg + rn
    ticket = cnt_ptr + pid_tg * tl.num_programs(0) + pid_n
    splitk_store(acc, z_ptr, part_ptr, ticket, ooff, nmask, pid_s, PART_STRIDE, SPLIT, True, True, RNE_FIX)


def sm_count(device: torch.device) -> int:
    if device.type != "cuda":
        return 4
    key = device.index if device.index is not None else torch.cuda.current_device()
    if key not in _SM_COUNT:
        _SM_COUNT[key] = torch.cuda.get_device_properties(key).multi_processor_count
    return _SM_COUNT[key]


def split_plan(t: int, ksel: int, head_blocks: int, block_n: int, waves: int, sms: int,
               max_splits: int | None = None) -> tuple[int, int]:
    """-> (entries per split, number of splits): enough programs for `waves` x SMs (at most max_splits
    splits per token), each owning a whole number of BN blocks. Depends on shapes only (graph-capturable)."""
    nblocks = max(1, triton.cdiv(ksel, block_n))
    want = max(1, triton.cdiv(waves * sms, max(1, t * head_blocks)))
    nsplit = min(nblocks, want, max_splits or nblocks)
    per = triton.cdiv(nblocks, nsplit) * block_n
    return per, max(1, triton.cdiv(ksel, per))


def _prepare(q, kv, seq_ids, indices, sink, positions, freqs, lengths):
    """Checks shared by the impls -> (device, T, Hl, Dh, Ksel)."""
    check_sparse_attention(q, kv, seq_ids, indices, sink, positions, freqs, lengths)
    dev = check_device(q, kv, seq_ids, indices, sink, positions, freqs, lengths)
    t, hl, dh = q.shape
    if dh & (dh - 1) or dh < 16:
        raise ValueError(f"sparse_attention: Dh must be a power of two >= 16, got {dh}")
    if kv.stride(2) != 1 or q.stride(2) != 1:
        raise ValueError("sparse_attention: q and kv must be contiguous in the head dim")
    return dev, t, hl, dh, indices.shape[1]


# impl "triton": one launch (split partials joined in the kernel by the last program of each token's head block)
FIN_ELEMS = 128      # partial values per thread that the join loads at once (registers, after the loop's are free)


COMBINE_MAX_ELEMS = 8 * 32 * FIN_ELEMS      # partial values one `_attn_combine` program loads at once, at most


def combine_cols(cfg: dict, dh: int, s_p2: int = 2) -> int:
    """Config COMBINE_COLS: the Dh columns of one head that a `_attn_combine` program joins, a power of two from 16
    dividing Dh (more, shorter programs share a small T).

    Default: all of them (one program a (token, head)), unless S_P2 splits of them would pass COMBINE_MAX_ELEMS
    (FIN_ELEMS a thread at 8 warps; at 16 warps a thread has 128 registers, fewer than it needs): then the widest
    power of two within it. One token at 1M tokens joined 512 splits of 512 columns in one program of 16 warps:
    3,800 bytes of spills on sm_120."""
    if "COMBINE_COLS" not in cfg:
        dc = dh
        while dc > 16 and dh % (dc // 2) == 0 and s_p2 * dc > COMBINE_MAX_ELEMS:
            dc //= 2
        return dc
    dc = cfg["COMBINE_COLS"]
    if not isinstance(dc, int) or dc < 16 or dc & (dc - 1) or dh % dc:
        raise ValueError(f"sparse_attention: COMBINE_COLS={dc!r} must be a power of two >= 16 dividing Dh={dh}")
    return dc


def combine_warps(s_p2: int, dh: int) -> int:
    """Warps of `_attn_combine` (one head's S_P2 x Dh partials loaded at once): FIN_ELEMS values a thread, 4 to 16."""
    return min(16, max(4, s_p2 * dh // (FIN_ELEMS * 32)))


def fused_configs(params: dict) -> list[dict]:
    """attention_configs x SPLITS, the most splits per token (the join reads SPLITS partials per head)."""
    return [{**c, "SPLITS": sp} for c in attention_configs(params) for sp in (4, 16, 32)]


def fused_default(params: dict) -> dict:
    return {**attention_default(params), "SPLITS": 16}


@register_impl("sparse_attention", "triton_fused", backend="triton", configs=fused_configs,
               default_config=fused_default, kernels=lambda: [_attn_fused])
def sparse_attention_fused(q: torch.Tensor, kv: torch.Tensor, seq_ids: torch.Tensor, indices: torch.Tensor,
                     sink: torch.Tensor, scale: float, positions: torch.Tensor | None = None,
                     freqs: torch.Tensor | None = None, lengths: torch.Tensor | None = None,
                     config: dict | None = None) -> torch.Tensor:
    """q [T, Hl, Dh] bf16, kv [B, N, Dh] bf16, indices [T, Ksel] int32 (-1 = masked) -> o [T, Hl, Dh] bf16.
    lengths [T] int32 (optional): token t reads only index columns < lengths[t]; the loops end there on
    the device, so the work follows lengths, not Ksel (HCA rows are Ncap wide, mostly -1).
    Indices and lengths are not range-checked on the device (that would need a host sync); out-of-range
    values are the caller's bug, as in FlashMLA. One launch; the join's tickets are the split-K tickets of
    kernels/linear.py (zero between launches, one stream)."""
    dev, t, hl, dh, ksel = _prepare(q, kv, seq_ids, indices, sink, positions, freqs, lengths)
    cfg = config or lookup("sparse_attention", {"T": t, "Hl": hl, "Ksel": ksel, "kernel": "fused"},
                           fused_default({"Hl": hl}))
    bh, bn, warps = cfg["BLOCK_H"], cfg["BLOCK_N"], cfg["num_warps"]
    o = torch.empty_like(q)
    if t == 0:
        return o
    indices = indices.to(torch.int32).contiguous()
    hb = triton.cdiv(hl, bh)
    per, nsplit = split_plan(t, ksel, hb, bn, cfg.get("waves", 2), sm_count(dev), cfg.get("SPLITS", 16))
    s_p2 = max(2, triton.next_power_of_2(nsplit))
    fin_h = max(1, min(bh, triton.next_power_of_2(FIN_ELEMS * 32 * warps // (s_p2 * dh) + 1) // 2))
    po = torch.empty(t, nsplit, hl, dh, dtype=torch.float32, device=dev)     # unused (no launch) when S = 1
    pml = torch.empty(t, nsplit, hl, 2, dtype=torch.float32, device=dev)
    cnt = split_tickets(dev, t * hb)
    rope_on = positions is not None
    _attn_fused[(t, nsplit, hb)](
        q, kv, seq_ids.contiguous(), indices, lengths.contiguous() if lengths is not None else indices, po, pml, cnt,
        sink.contiguous(), positions.contiguous() if rope_on else seq_ids, freqs.contiguous() if rope_on else sink, o,
        hl, ksel, per, nsplit, float(scale) * LOG2E,
        q.stride(0), q.stride(1), kv.stride(0), kv.stride(1), indices.stride(0), o.stride(0), o.stride(1),
        DH=dh, BLOCK_H=bh, BLOCK_N=bn, DOT_UPCAST=INTERPRET, HAS_LEN=lengths is not None,
        R=2 * freqs.shape[0] if rope_on else 2, FIN_H=fin_h, S_P2=s_p2, ROPE=rope_on, RNE_FIX=INTERPRET,
        PREFETCH=bool(cfg.get("PREFETCH", 0)),
        num_warps=warps, num_stages=cfg["num_stages"], **({"maxnreg": cfg["maxnreg"]} if "maxnreg" in cfg else {}))
    return o


def _split_partials(q, kv, seq_ids, indices, lengths, scale, cfg, dev, fp8=None) -> tuple[torch.Tensor, torch.Tensor,
                                                                                          int]:
    """The split launch of impl "triton" (and of sparse_attention_wo_a): `_attn_split` over (T, S, head blocks),
    S from `split_plan`; fp8 (kv_rope, kv_exp): kv is the FP8 cache's codes (impl triton_fp8kv, `pack_fp8_kv`).
    -> (partials (T, S, Hl, Dh) fp32, (m, l) (T, S, Hl, 2) fp32, S)."""
    t, hl, dh = q.shape
    fp8_args = {}
    if fp8 is not None:
        if cfg.get("PREFETCH", 0):
            raise ValueError("sparse_attention: config PREFETCH does not read the FP8 cache (impl triton_fp8kv)")
        rope, exps = fp8
        fp8_args = dict(KV_FP8=True, NOPE=kv.shape[2], GROUP=KV_GROUP, kr_ptr=rope, ke_ptr=exps, s_rb=rope.stride(0),
                        s_rn=rope.stride(1), s_eb=exps.stride(0), s_en=exps.stride(1))
    ksel = indices.shape[1]
    indices = indices.to(torch.int32).contiguous()
    seq_ids = seq_ids.contiguous()
    bh, bn = cfg["BLOCK_H"], cfg["BLOCK_N"]
    hb = triton.cdiv(hl, bh)
    per, nsplit = split_plan(t, ksel, hb, bn, cfg.get("waves", 2), sm_count(dev))
    po = torch.empty(t, nsplit, hl, dh, dtype=torch.float32, device=dev)
    pml = torch.empty(t, nsplit, hl, 2, dtype=torch.float32, device=dev)
    has_len = lengths is not None
    _attn_split[(t, nsplit, hb)](
        q, kv, seq_ids, indices, lengths.contiguous() if has_len else indices, po, pml, hl, ksel, per, nsplit,
        float(scale) * LOG2E, q.stride(0), q.stride(1), kv.stride(0), kv.stride(1), indices.stride(0),
        DH=dh, BLOCK_H=bh, BLOCK_N=bn, DOT_UPCAST=INTERPRET, HAS_LEN=has_len, PREFETCH=bool(cfg.get("PREFETCH", 0)),
        num_warps=cfg["num_warps"], num_stages=cfg["num_stages"], **pdl_args(dev, t), **fp8_args)
    return po, pml, nsplit


def split_combine_configs(params: dict) -> list[dict]:
    """impl triton's space: attention_configs (the split launch), and the default split with the combine's programs
    over column blocks of each head (COMBINE_COLS)."""
    base = attention_default(params)
    return attention_configs(params) + [{**base, "COMBINE_COLS": dc} for dc in (64, 128, 256)
                                        if dc < params.get("Dh", 512)]


# impl "triton": two launches (split, then _attn_combine): faster than the one launch on the H200 (2026-12-01,
# docs/perf/attention.md: the single joining program is slower than the combine spread over (T, Hl) programs) --
@register_impl("sparse_attention", "triton", backend="triton", configs=split_combine_configs,
               default_config=attention_default, kernels=lambda: [_attn_split, _attn_combine])
def sparse_attention(q: torch.Tensor, kv: torch.Tensor, seq_ids: torch.Tensor, indices: torch.Tensor,
                        sink: torch.Tensor, scale: float, positions: torch.Tensor | None = None,
                        freqs: torch.Tensor | None = None, lengths: torch.Tensor | None = None,
                        config: dict | None = None) -> torch.Tensor:
    """q [T, Hl, Dh] bf16, kv [B, N, Dh] bf16, indices [T, Ksel] int32 (-1 = masked) -> o [T, Hl, Dh] bf16.
    lengths [T] int32 (optional): token t reads only index columns < lengths[t]; the loops end there on
    the device, so the work follows lengths, not Ksel (HCA rows are Ncap wide, mostly -1).
    Indices and lengths are not range-checked on the device (that would need a host sync); out-of-range
    values are the caller's bug, as in FlashMLA. Two launches: fp32 partials, then `_attn_combine` grid (T, Hl,
    Dh / COMBINE_COLS)."""
    dev, t, hl, dh, ksel = _prepare(q, kv, seq_ids, indices, sink, positions, freqs, lengths)
    return _split_combine(q, kv, seq_ids, indices, sink, scale, positions, freqs, lengths, config, dev, None)


def _split_combine(q, kv, seq_ids, indices, sink, scale, positions, freqs, lengths, config, dev, fp8):
    """Impl triton's two launches (and triton_fp8kv's, fp8 = (kv_rope, kv_exp)) on checked inputs."""
    t, hl, dh = q.shape
    ksel = indices.shape[1]
    cfg = config or lookup("sparse_attention", {"T": t, "Hl": hl, "Ksel": ksel}, attention_default({"Hl": hl}))
    o = torch.empty_like(q)
    if t == 0:
        return o
    po, pml, nsplit = _split_partials(q, kv, seq_ids, indices, lengths, scale, cfg, dev, fp8)
    rope_on = positions is not None
    r = 2 * freqs.shape[0] if rope_on else 2
    s_p2 = max(2, triton.next_power_of_2(nsplit))
    dc = combine_cols(cfg, dh, s_p2)
    _attn_combine[(t, hl, dh // dc)](
        po, pml, sink.contiguous(), positions.contiguous() if rope_on else seq_ids,
        freqs.contiguous() if rope_on else sink, o, hl, nsplit, o.stride(0), o.stride(1),
        DH=dh, R=r, S_P2=s_p2, ROPE=rope_on, RNE_FIX=INTERPRET, DC=dc,
        num_warps=combine_warps(s_p2, dc), num_stages=1, **pdl_args(q.device, t))
    return o




# impl "triton_fp8kv": the cache stored as FP8 (SPEC 2, "KV cache storage") -----------------------------------------
KV_GROUP = 64       # the cache's FP8 simulation group (kv_write, the compressor): one exponent byte per 64 dims


def pack_fp8_kv(kv: torch.Tensor, rope_dims: int):
    """kv [B, N, Dh] bf16 -> (codes [B, N, Dh - rope_dims] e4m3, rope [B, N, rope_dims] bf16, exponents [B, N, Dh /
    64] uint8: UE8M0, 2^(e - 127) per 64 dims, 127 over the rope dims), with codes x 2^(e - 127) == kv in every
    element of the first Dh - rope_dims dims (NaN rows stay NaN). Every attention cache of the model holds such
    entries (kv_write and the compressor FP8-simulate the non-rope dims in groups of 64). None when an element is not
    exact, or when rope_dims is neither 0 nor 64 (the kernel puts the rope dims in as one 64-dim group; Flash has 64).
    Each group takes the smallest power of two s with max|kv| / s <= 448, as the wo_a codes (kernels/linear.py
    fp8_codes_exact). 584 bytes an entry at Dh 512 / 64 rope dims instead of 1024."""
    b, n, dh = kv.shape
    nope = dh - rope_dims
    if kv.dtype != torch.bfloat16 or dh % KV_GROUP or nope <= 0 or rope_dims not in (0, KV_GROUP):
        return None
    x = kv[..., :nope].float().reshape(b, n, nope // KV_GROUP, KV_GROUP)
    found = fp8_codes_exact(x, x.abs().amax(-1), lambda s: s[..., None])
    if found is None:
        return None
    codes, scale = found
    exps = torch.full((b, n, dh // KV_GROUP), 127, dtype=torch.uint8, device=kv.device)
    exps[..., :nope // KV_GROUP] = (torch.frexp(scale)[1] + 126).to(torch.uint8)    # scale = 2^(exp - 1)
    return codes.reshape(b, n, nope).contiguous(), kv[..., nope:].contiguous(), exps


def _rope_dims(freqs) -> int:
    return 0 if freqs is None else 2 * freqs.shape[0]


def prepare_fp8_kv(inputs: dict) -> dict:
    """Impl.prepare of triton_fp8kv: kv as `pack_fp8_kv` stores it (kv the codes, kv_rope, kv_exp) when it is an
    FP8-simulated cache; otherwise unchanged (the bf16 path)."""
    kv = inputs.get("kv")
    if not isinstance(kv, torch.Tensor) or kv.dim() != 3:
        return inputs
    packed = pack_fp8_kv(kv, _rope_dims(inputs.get("freqs")))
    if packed is None:
        return inputs
    return {**inputs, "kv": packed[0], "kv_rope": packed[1], "kv_exp": packed[2]}


def _check_fp8_kv(q, kv, kv_rope, kv_exp, freqs) -> None:
    """The FP8 cache's form: codes [B, N, Dh - R] e4m3, kv_rope [B, N, R] bf16 (R the rope dims of freqs),
    kv_exp [B, N, Dh / 64] uint8, contiguous rows (their device: the caller's check_device)."""
    check_dtype("sparse_attention: kv (FP8 codes)", kv, torch.float8_e4m3fn)
    check_dtype("sparse_attention: kv_rope", kv_rope, torch.bfloat16)
    check_dtype("sparse_attention: kv_exp", kv_exp, torch.uint8)
    dh, r = q.shape[-1], _rope_dims(freqs)
    if kv.dim() != 3:
        raise ValueError(f"sparse_attention: kv (FP8 codes) must be [B, N, Dh - R], got {tuple(kv.shape)}")
    b, n = kv.shape[:2]
    for name, x, shape in (("kv", kv, (b, n, dh - r)), ("kv_rope", kv_rope, (b, n, r)),
                           ("kv_exp", kv_exp, (b, n, dh // KV_GROUP))):
        check_shape(f"sparse_attention: {name}", x, shape)
        if x.stride(2) != 1:
            raise ValueError(f"sparse_attention: {name} must be contiguous in its last dim")
    if r not in (0, KV_GROUP) or dh % KV_GROUP:
        raise ValueError(f"sparse_attention: the FP8 cache needs R 0 or {KV_GROUP} and Dh a multiple of {KV_GROUP}, "
                         f"got R {r}, Dh {dh}")


def fp8kv_configs(params: dict) -> list[dict]:
    """Impl triton_fp8kv's space: 16-entry blocks only. The gathered rows are made bf16 in registers and reach the
    tensor cores through shared memory, so at 32 entries the split kernel takes 102,528 B of shared memory at 2
    stages (past sm_120's 101,376) and spills 40 B at 1 stage (sm_120, Flash TP8, 64 tokens; scripts/sass_mix.py)."""
    return [{"BLOCK_H": bh, "BLOCK_N": 16, "num_warps": warps, "num_stages": stages, "waves": waves}
            for bh in ([16] if params.get("Hl", 8) <= 16 else [16, 32]) for warps in (4, 8) for stages in (1, 2)
            for waves in (1, 2, 4)]


def fp8kv_default(params: dict) -> dict:
    """sm_120: 59,456 B of shared memory, 254 registers, no spill; sm_90 255 registers, two programs an SM."""
    return {**attention_default(params), "BLOCK_N": 16}


@register_impl("sparse_attention", "triton_fp8kv", backend="triton", configs=fp8kv_configs,
               default_config=fp8kv_default, kernels=lambda: [_attn_split, _attn_combine], prepare=prepare_fp8_kv,
               form="fp8kv")
def sparse_attention_fp8kv(q: torch.Tensor, kv: torch.Tensor, seq_ids: torch.Tensor, indices: torch.Tensor,
                           sink: torch.Tensor, scale: float, positions: torch.Tensor | None = None,
                           freqs: torch.Tensor | None = None, lengths: torch.Tensor | None = None,
                           kv_rope: torch.Tensor | None = None, kv_exp: torch.Tensor | None = None,
                           config: dict | None = None) -> torch.Tensor:
    """Impl triton's two launches on the cache stored as FP8 (`pack_fp8_kv`: 584 instead of 1024 bytes an entry at
    the Flash widths), the split kernel making each gathered row bf16 again (`_fp8_kv_rows`): the same values, so
    the output equals impl triton's bit for bit in the interpreter; compiled, within 2^-7 of its largest value
    (rows made in registers reach the tensor cores another way than loaded rows; H100, session 56). Slower than
    impl triton at every Flash TP8 case there: 9.1 against 6.7-7.3 us at one token, 70.5 against 28.6-34.2 at 64
    tokens and 8K context. Without kv_rope / kv_exp, kv is the bf16 cache (impl triton)."""
    if kv_exp is None and kv_rope is None:
        return sparse_attention(q, kv, seq_ids, indices, sink, scale, positions, freqs, lengths, config)
    if kv_exp is None or kv_rope is None:
        raise ValueError("sparse_attention: the FP8 cache needs both kv_rope and kv_exp")
    _check_fp8_kv(q, kv, kv_rope, kv_exp, freqs)
    b, n = kv.shape[:2]
    standin = torch.empty((1, 1, 1), dtype=torch.bfloat16, device=q.device).expand(b, n, q.shape[-1])
    check_sparse_attention(q, standin, seq_ids, indices, sink, positions, freqs, lengths)
    dev = check_device(q, kv, kv_rope, kv_exp, seq_ids, indices, sink, positions, freqs, lengths)
    dh = q.shape[-1]
    if dh & (dh - 1) or dh < KV_GROUP:
        raise ValueError(f"sparse_attention: Dh must be a power of two >= {KV_GROUP} for the FP8 cache, got {dh}")
    cfg = config or lookup("sparse_attention", {"T": q.shape[0], "Hl": q.shape[1], "Ksel": indices.shape[1],
                                                "kernel": "fp8kv"}, fp8kv_default({"Hl": q.shape[1]}))
    return _split_combine(q, kv, seq_ids, indices, sink, scale, positions, freqs, lengths, cfg, dev,
                          (kv_rope, kv_exp))

# sparse_attention_wo_a: the attention's split launch, then wo_a's GEMV joining the partials itself --------------
def woa_default(params: dict) -> dict:
    """sparse attention's default for the split launch; JOIN False: the two ops as the step ran them (sparse_attention
    then grouped_wo_a, each with its own launches and tuned configs). JOIN True (wo_a's GEMV joins the partials: one
    launch fewer a layer, no o round trip) measured slower in the Flash TP8 step on the H200 (session 25, A/A
    controlled): BN_O 64 / 128 / 256 -0.334 / -0.183 / -0.067 ms at C = 1, BN_O 64 -4.385 ms at C = 16 (each token's
    GEMV reads the weight again), and joining once for several output tiles a program (fewer, longer programs) was
    slower still (docs/perf/h200-2026-12-04-session25.md). Kept as a config for verify and tune, not the default. Its
    GEMV: BN_O, SPAN, O_WARPS."""
    return {**attention_default(params), "JOIN": False, "BN_O": 64, "SPAN": 128, "O_WARPS": 4}


def woa_configs(params: dict) -> list[dict]:
    """JOIN False (the default), sparse attention's space at the default GEMV and the GEMV's shapes at the default
    attention, both with JOIN (the default attention at the default GEMV once)."""
    base = woa_default(params)
    gemv = [{**base, "JOIN": True, "BN_O": bn, "SPAN": span, "O_WARPS": w}
            for bn in (32, 64, 128) for span in (128, 256) for w in (4, 8) if span <= params.get("Dh", 512)]
    joined = [{**base, **c, "JOIN": True} for c in attention_configs(params)]
    return [base] + joined + [c for c in gemv if c not in joined]


def _check_wo_a(q: torch.Tensor, wo_a: torch.Tensor, wo_a_scale: torch.Tensor | None = None) -> tuple[int, int, int]:
    """check_attention_wo_a (its shape against q; with wo_a_scale, wo_a the prepared e4m3 codes and their scales:
    check_wo_a_scale), and wo_a on q's device -> (Gl, O, Hg*Dh)."""
    if wo_a_scale is not None:
        check_wo_a_scale(wo_a, wo_a_scale, "wo_a")
    out = check_attention_wo_a(q, wo_a if wo_a_scale is None else wo_a.new_empty(wo_a.shape, dtype=torch.bfloat16,
                                                                                 device="meta"))
    check_device(q, wo_a)
    return out


def _two_ops(q, kv, seq_ids, indices, sink, scale, wo_a, wo_a_scale, gl, positions, freqs, lengths):
    """sparse_attention (its launches, tuned config and checks), then grouped_wo_a (likewise)."""
    o = sparse_attention(q, kv, seq_ids, indices, sink, scale, positions, freqs, lengths)
    return grouped_wo_a(o.reshape(q.shape[0], gl, -1), wo_a, wo_a_scale)


def _prepare_wo_a(inputs: dict) -> dict:
    return prepare_wo_a(inputs, "wo_a")


@register_impl("sparse_attention_wo_a", "triton_parts", backend="triton", configs=None, default_config=None,
               kernels=lambda: [_attn_split, _attn_combine], prepare=_prepare_wo_a)
def sparse_attention_wo_a_parts(q, kv, seq_ids, indices, sink, scale, wo_a, positions=None, freqs=None, lengths=None,
                                wo_a_scale=None, config=None):
    """The two ops as the step ran them: sparse_attention (its launches and tuned config), then grouped_wo_a."""
    gl, _, _ = _check_wo_a(q, wo_a, wo_a_scale)
    return _two_ops(q, kv, seq_ids, indices, sink, scale, wo_a, wo_a_scale, gl, positions, freqs, lengths)


def sparse_attention_wo_a(q: torch.Tensor, kv: torch.Tensor, seq_ids: torch.Tensor, indices: torch.Tensor,
                          sink: torch.Tensor, scale: float, wo_a: torch.Tensor, positions: torch.Tensor | None = None,
                          freqs: torch.Tensor | None = None, lengths: torch.Tensor | None = None,
                          wo_a_scale: torch.Tensor | None = None, config: dict | None = None) -> torch.Tensor:
    """-> z [T, Gl, O] bf16 (contract: reference/attention.py sparse_attention_wo_a). JOIN: `_attn_split` (as
    sparse_attention's), then `_attn_wo_a_kernel`, wo_a's GEMV joining the split partials itself (no o in memory, no
    combine launch); JOIN False: the two ops (their wrappers check the rest: nothing is checked twice). wo_a bf16, or
    its e4m3 codes with wo_a_scale (prepare_wo_a, impl triton: the bf16 weight's products bit for bit)."""
    gl, n_o, i = _check_wo_a(q, wo_a, wo_a_scale)
    t, hl, dh = q.shape
    cfg = config or lookup("sparse_attention_wo_a", {"T": t, "Hl": hl, "Ksel": indices.shape[-1], "O": n_o},
                           woa_default({"T": t, "Hl": hl, "Dh": dh}))
    if not cfg.get("JOIN", True):
        return _two_ops(q, kv, seq_ids, indices, sink, scale, wo_a, wo_a_scale, gl, positions, freqs, lengths)
    dev = _prepare(q, kv, seq_ids, indices, sink, positions, freqs, lengths)[0]
    span, bk = cfg["SPAN"], 128
    if span % bk or dh % span:
        raise ValueError(f"sparse_attention_wo_a: SPAN={span} must be a multiple of 128 dividing Dh={dh}")
    z = torch.empty(t, gl, n_o, dtype=torch.bfloat16, device=dev)
    if t == 0:
        return z
    po, pml, nsplit = _split_partials(q, kv, seq_ids, indices, lengths, scale, cfg, dev)
    rope_on = positions is not None
    wo_a = wo_a.contiguous()
    splits = i // span
    grid = (triton.cdiv(n_o, cfg["BN_O"]), splits, t * gl)
    part = z if splits == 1 else torch.empty((splits, t, gl, n_o), dtype=torch.float32, device=dev)
    tickets = split_tickets(dev, grid[0] * grid[2]) if splits > 1 else part
    _attn_wo_a_kernel[grid](
        po, pml, sink.contiguous(), positions.contiguous() if rope_on else seq_ids,
        freqs.contiguous() if rope_on else sink, wo_a, z, part, tickets, hl, hl // gl, gl, nsplit, n_o,
        wo_a.stride(0), wo_a.stride(1), z.stride(0), z.stride(1), z.numel(),
        DH=dh, R=2 * freqs.shape[0] if rope_on else 2, S_P2=max(2, triton.next_power_of_2(nsplit)), SPAN=span,
        BN=cfg["BN_O"], BK=bk, SPLIT=splits, ROPE=rope_on, RNE_FIX=INTERPRET, num_warps=cfg["O_WARPS"],
        num_stages=1, **pdl_args(dev, t, wo_a), **scale_args(wo_a_scale))
    return z


# impl triton reads wo_a as FP8 (prepared at load); triton_bf16 is the same code on the bf16 weight, for side-by-side
# timing (kernelbench bench / decode-bench --use sparse_attention_wo_a=triton_bf16)
register_impl("sparse_attention_wo_a", "triton", backend="triton", configs=woa_configs, default_config=woa_default,
              kernels=lambda: [_attn_split, _attn_wo_a_kernel], prepare=_prepare_wo_a)(sparse_attention_wo_a)
register_impl("sparse_attention_wo_a", "triton_bf16", backend="triton", configs=woa_configs,
              default_config=woa_default, kernels=lambda: [_attn_split, _attn_wo_a_kernel])(sparse_attention_wo_a)
