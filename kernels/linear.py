"""Triton linear layers: block-scaled FP8 and FP4 GEMM (activations fp8-quantized inside), bf16 GEMM
(bf16_linear, lm_head, grouped_wo_a). Decode shapes: M = 1..64 rows against weights of 1-270 MB.

Letters: M rows, N output features, K input features, G groups (grouped_wo_a), S split-K parts,
BN x BM output tile (weights are the MMA's M side: `dot(W_tile (BN, BK), x_tile^T (BK, BM))`, so
M = 1 pads only the small side to 16), KB = K / 128 quantization blocks.

Work partitioning: grid (N tiles, S, M tiles * G). At decode the N tiles alone are too few for 132 SMs
(N = 1024, BN = 64 is 16 programs), so K is split into S parts that write fp32 partials (S, M, N) and
a second small kernel sums them in a fixed order (deterministic) and casts.
FP8, impl `triton` (`_fp8_linear_v2_kernel`, docs/perf/linear.md): one launch at every M. M = 1 is an FMA GEMV:
each program loads its whole (BN, NB, 128) weight tile first, quantizes the x groups it meets (act_quant_e4m3,
kernels/quant.py: the reference's UE8M0 / e4m3 arithmetic), folds both power-of-two block scales into x and
does one fp32 FMA per weight byte (no tensor-core padding of the single row). M > 1: tl.dot on e4m3 codes with
x quantized in the K loop (one block ahead), as the MMA's A operand from registers (BM 64) or B (W . x^T).
Split K (all paths): every program stores its fp32 partial, takes a ticket (one int32 per output tile, atomic
acq_rel after a CTA barrier); the last to arrive sums the S partials in split order 0..S-1 (the result does not
depend on arrival order: bit-identical reruns), writes bf16 and puts the ticket back to zero. The tickets live
in a per-device buffer zeroed once (`split_tickets`), so a launch needs no memset and the wrapper is CUDA-graph
capturable after one eager call.
Impl `triton` takes the GEMM family as config key PATH ("v2" the kernel above, "v1" the code of impl `triton_v1`),
so a tuned entry picks it per (M, N, K); the default takes "v1" at M >= 33 with K >= 4096 (fp8_v2_default).
The first one-launch kernel (`_fp8_linear_kernel`, impl `triton_v1`: x quantized in the GEMM at M = 1, a
pre-pass above; W . x^T tiles; sm_120 QMMA.16832 E4M3, sm_90 QGMMA 64x8x32) and its three-launch form
(act_quant_fp8, the GEMM on codes, _splitk_reduce_kernel: impl `triton_3launch`) stay registered for
side-by-side timing; attention_front reuses its tile (fp8_gemm_tile, splitk_store).
bf16 (`_bf16_gemm_kernel`): tl.dot tiles, or at M = 1 (BM = 1, impl `triton`) the same one-step FMA GEMV; the
earlier defaults (tensor-core tiles at every M) are impl `triton_v1`.
FP4: x is fp8-simulated first (bf16 values e4m3 * 2^k, exact); nibbles become bf16 bit patterns with the
UE8M0 group scale added to the exponent field (integer ops, kernels/quant.py fp4_decode_bf16); two bf16
dots per 128-block (even and odd k) so the packed bytes never need interleaving.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernelbench.kernels.common import (INTERPRET, bulk_rows_ok, check_device, check_dtype, check_shape, dot_operand,
                                       fp8_dot, fp8_promote, l2_prefetch_rows, pdl_args, pdl_enter, sm90_compiled,
                                       to_bf16, zeroed_scratch)
from kernelbench.kernels.quant import (_fp8_quant_kernel, _launch_fp8, act_quant_e4m3, fp4_decode_bf16, fp4_hi_e4m3,
                                       fp4_lo_e4m3, pow2)
from kernelbench.reference.quant import FP8_MAX, block_scales_full, ue8m0_scale
from kernelbench.registry import register_impl
from kernelbench.tuned_configs import lookup

NUM_SMS_TARGET = 132      # H200 SM count; the RTX PRO 6000 has 188: the tuned table overrides per device


@triton.jit
def fp8_gemm_tile(x_ptr, sx_ptr, w_ptr, ws_ptr, rn, rm, mmask, nmask, nb, K, ldx, kb0, KB_SPLIT: tl.constexpr,
                  BM: tl.constexpr, BN: tl.constexpr, QUANT: tl.constexpr, HW_CVT: tl.constexpr,
                  STAGED: tl.constexpr = False, PROMOTE: tl.constexpr = 0):
    """(BN, BM) fp32: W[rn, K blocks kb0 .. kb0 + KB_SPLIT) . X[rm, same]^T with both block scales, each 128-deep
    dot by fp8_dot (PROMOTE). QUANT: x is bf16 (rows ldx apart) quantized here per (row, 128-block); else e4m3 codes
    (rows ldx apart) with sx (M, K/128).
    nb: the tile's weight-scale row (BN divides 128). The compiler's pipeline carries the x and weight tiles; the
    scales (the weight's byte, x's sx row) are loaded in their own step (sm_90 SASS: plain loads waited on at the
    scale multiply). STAGED (config PREFETCH "staged"): the scales one step ahead. The same result."""
    rk = tl.arange(0, 128)
    KB = K // 128
    acc = tl.zeros((BN, BM), dtype=tl.float32)
    if STAGED:
        wsrow = ws_ptr + nb * KB
        swb = tl.load(wsrow + kb0)
        if not QUANT:
            sxb = tl.load(sx_ptr + rm * KB + kb0, mask=mmask, other=0.0)
    for i in tl.range(0, KB_SPLIT):                   # the wrapper makes S divide the K blocks
        kb = kb0 + i
        xv = tl.load(x_ptr + rm[:, None] * ldx + kb * 128 + rk[None, :], mask=mmask[:, None], other=0.0)
        w = tl.load(w_ptr + rn[:, None] * K + kb * 128 + rk[None, :], mask=nmask[:, None], other=0.0)
        if STAGED:
            swn = tl.load(wsrow + kb + 1, mask=i + 1 < KB_SPLIT, other=127)
            sw = pow2(swb.to(tl.int32) - 127)
        if QUANT:
            xq, sx = act_quant_e4m3(xv.to(tl.float32), HW_CVT)                     # (BM, 128) e4m3, (BM,)
        else:
            xq = xv
            if STAGED:
                sxn = tl.load(sx_ptr + rm * KB + kb + 1, mask=mmask & (i + 1 < KB_SPLIT), other=0.0)
                sx = sxb
            else:
                sx = tl.load(sx_ptr + rm * KB + kb, mask=mmask, other=0.0)
        if not STAGED:
            sw = pow2(tl.load(ws_ptr + nb * KB + kb).to(tl.int32) - 127)
        d = fp8_dot(w, tl.trans(xq), PROMOTE)                                      # (BN, BM) fp32
        acc += d * (sx * sw)[None, :]
        if STAGED:
            swb = swn
            if not QUANT:
                sxb = sxn
    return acc


@triton.jit
def fp8_rows_tile(x_ptr, sx_ptr, w_ptr, ws_ptr, rn, rm, mmask, nmask, nb, K, ldx, kb0, KB_SPLIT: tl.constexpr,
                  BM: tl.constexpr, BN: tl.constexpr, NB: tl.constexpr, QUANT: tl.constexpr, HW_CVT: tl.constexpr,
                  STAGED: tl.constexpr = False, PROMOTE: tl.constexpr = 0):
    """fp8_gemm_tile (STAGED: its scales a step ahead; PROMOTE: fp8_dot), or with BM == 1 (one row per program, x
    bf16: QUANT) fp8_linear's FMA GEMV (fp8_gemv_span, NB K blocks a step, the same arithmetic as fp8_linear's BM = 1
    path) as a (BN, 1) tile: the GEMMs with a fused epilogue (attention_front, attention_q, indexer_q) at one token."""
    if BM == 1:
        tl.static_assert(QUANT, "the BM = 1 GEMV quantizes a bf16 x row itself")
        return fp8_gemv_span(x_ptr + rm * ldx, w_ptr, ws_ptr, rn, nmask, nb, K, kb0, KB_SPLIT // NB, NB, BN,
                             HW_CVT)[:, None]
    return fp8_gemm_tile(x_ptr, sx_ptr, w_ptr, ws_ptr, rn, rm, mmask, nmask, nb, K, ldx, kb0, KB_SPLIT, BM, BN, QUANT,
                         HW_CVT, STAGED, PROMOTE)


@triton.jit
def ticket_arrive(ticket, arrivals):
    """After this program's stores: a CTA barrier (every thread's stores come before the release), then `ticket`
    (int32, zero between launches) taken acq_rel -> whether this program is the last of `arrivals` to arrive (it then
    sees every other arrival's stores)."""
    tl.debug_barrier()
    return tl.atomic_add(ticket, 1, sem="acq_rel", scope="gpu") == arrivals - 1


@triton.jit
def sum_partials(tot, part_ptr, off, mask, PART_STRIDE, SPLIT: tl.constexpr):
    """tot + the SPLIT fp32 partials at part + off + s * PART_STRIDE, s = 0..SPLIT-1 in that order (the result does not
    depend on which program arrived last: bit-identical reruns), loaded past L1 (other programs stored them)."""
    for s in tl.static_range(SPLIT):
        tot += tl.load(part_ptr + off + s * PART_STRIDE, mask=mask, other=0.0, cache_modifier=".cg")
    return tot


@triton.jit
def splitk_store(acc, out_ptr, part_ptr, ticket, ooff, omask, pid_s, PART_STRIDE, SPLIT: tl.constexpr,
                 REDUCE: tl.constexpr, OUT_BF16: tl.constexpr, RNE_FIX: tl.constexpr):
    """Store a (BN, BM) fp32 tile at out + ooff (SPLIT == 1), or its split-K partial at part + ooff + pid_s *
    PART_STRIDE; with REDUCE the last program of the tile to arrive at `ticket` (int32, zero between launches)
    sums the SPLIT partials in order 0..S-1 (deterministic), stores the output and resets the ticket.
    -> whether this program stored the finished tile (always with SPLIT == 1)."""
    if SPLIT == 1:
        if OUT_BF16:
            tl.store(out_ptr + ooff, to_bf16(acc, RNE_FIX), mask=omask)
        else:
            tl.store(out_ptr + ooff, acc, mask=omask)
        done = True
    else:
        tl.store(part_ptr + ooff + pid_s * PART_STRIDE, acc, mask=omask)
        done = False
        if REDUCE:
            done = ticket_arrive(ticket, SPLIT)
            if done:
                tot = sum_partials(tl.zeros(acc.shape, dtype=tl.float32), part_ptr, ooff, omask, PART_STRIDE, SPLIT)
                if OUT_BF16:
                    tl.store(out_ptr + ooff, to_bf16(tot, RNE_FIX), mask=omask)
                else:
                    tl.store(out_ptr + ooff, tot, mask=omask)
                tl.atomic_xchg(ticket, 0, sem="relaxed", scope="gpu")   # ready for the next launch
    return done


@triton.jit
def fp8_tile_head_ticket(x_ptr, sx_ptr, w_ptr, ws_ptr, y_ptr, part_ptr, cnt_ptr, M, N, K, sxm, HL, HEAD_W,
                         KB_SPLIT: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, SPLIT: tl.constexpr,
                         QUANT: tl.constexpr, HW_CVT: tl.constexpr, RNE_FIX: tl.constexpr, NB: tl.constexpr = 1,
                         PDL: tl.constexpr = False, HEAD_SUM: tl.constexpr = False, HEAD_BLOCK: tl.constexpr = 1,
                         STAGED: tl.constexpr = False, PROMOTE: tl.constexpr = 0):
    """The prologue of the GEMMs with a per-head epilogue (attention_q, indexer_q): program (pid_n, pid_s, pid_m)
    computes its (BN, BM) fp8 tile of y (M, N = HL heads of HEAD_W) as _fp8_linear_kernel does (x bf16 quantized here
    when QUANT, else codes with sx; BM == 1: fp8_linear's GEMV, fp8_rows_tile), finishes it through splitk_store
    (tickets: ceil(M / BM) * N / BN tile tickets in cnt, then one per (row block, head)), and the program finishing a
    tile takes its head's ticket. HEAD_SUM (config SPLIT_SUM "head", SPLIT > 1): one ticket stage instead of two;
    every program stores its partial and takes the head's ticket, and the head's last sums the head's partials
    (HEAD_BLOCK >= HEAD_W columns, a power of two; split order 0..S-1 as splitk_store: the same bf16 y) and stores y.
    -> (last, ticket, head, pid_m): last is true in the program that finished the head's last tile: it owns the
    head's epilogue over the row block and puts `ticket` back to zero after it."""
    pid_n, pid_s, pid_m = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    rn = pid_n * BN + tl.arange(0, BN)
    l2_prefetch_rows(w_ptr, rn, rn < N, K, pid_s * KB_SPLIT * 128, KB_SPLIT * 128, PDL)   # PDL: weights first
    pdl_enter(PDL)
    rm = pid_m * BM + tl.arange(0, BM)
    mmask = rm < M
    if QUANT:
        ldx = sxm                                     # bf16 x may be a row-strided view
    else:
        ldx = K                                       # codes from act_quant_fp8 are contiguous
    acc = fp8_rows_tile(x_ptr, sx_ptr, w_ptr, ws_ptr, rn, rm, mmask, rn < N, (pid_n * BN) // 128, K, ldx,
                        pid_s * KB_SPLIT, KB_SPLIT, BM, BN, NB, QUANT, HW_CVT, STAGED, PROMOTE)
    NT = tl.num_programs(0)
    head = (pid_n * BN) // HEAD_W
    ticket = cnt_ptr + tl.num_programs(2) * NT + pid_m * HL + head
    ooff = rm[None, :] * N + rn[:, None]
    omask = mmask[None, :] & (rn < N)[:, None]
    last = False
    if HEAD_SUM and SPLIT > 1:
        tl.store(part_ptr + ooff + pid_s * M * N, acc, mask=omask)
        last = ticket_arrive(ticket, (HEAD_W // BN) * SPLIT)
        if last:
            hc = tl.arange(0, HEAD_BLOCK)
            hoff = rm[None, :] * N + (head * HEAD_W + hc)[:, None]
            hmask = mmask[None, :] & (hc < HEAD_W)[:, None]
            tot = sum_partials(tl.zeros((HEAD_BLOCK, BM), dtype=tl.float32), part_ptr, hoff, hmask, M * N, SPLIT)
            tl.store(y_ptr + hoff, to_bf16(tot, RNE_FIX), mask=hmask)
            tl.debug_barrier()                        # the head's y before the epilogue reloads it
    else:
        done = splitk_store(acc, y_ptr, part_ptr, cnt_ptr + pid_m * NT + pid_n, ooff, omask, pid_s, M * N, SPLIT,
                            True, True, RNE_FIX)
        if done:                                      # the tile's bf16 stores, then the head's ticket
            last = ticket_arrive(ticket, HEAD_W // BN)
    return last, ticket, head, pid_m


SPLIT_SUMS = ("tile", "head")


def head_sum_option(cfg: dict, op: str) -> bool:
    """Config SPLIT_SUM of the GEMMs with a per-head epilogue (fp8_tile_head_ticket): "tile" (default) each output
    tile's last split program sums its partials, then the tiles take the head's ticket (two ticket stages); "head"
    every program takes the head's ticket and the head's last sums all its partials (one stage). "head" is for the
    one-token GEMV tile (BM 1): a larger row block would hold BM x HEAD_W sums in the one program."""
    mode = cfg.get("SPLIT_SUM", "tile")
    if mode not in SPLIT_SUMS:
        raise ValueError(f"{op}: config SPLIT_SUM={mode!r}: one of {SPLIT_SUMS}")
    if mode == "head" and cfg["BM"] != 1:
        raise ValueError(f"{op}: config SPLIT_SUM 'head' is for the one-token GEMV tile (BM 1), got BM {cfg['BM']}")
    return mode == "head"


@triton.jit
def _fp8_linear_kernel(x_ptr, sx_ptr, w_ptr, ws_ptr, out_ptr, part_ptr, cnt_ptr, M, N, K, sxm,
                       KB_SPLIT: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, SPLIT: tl.constexpr,
                       QUANT: tl.constexpr, REDUCE: tl.constexpr, HW_CVT: tl.constexpr, RNE_FIX: tl.constexpr,
                       STAGED: tl.constexpr = False, PROMOTE: tl.constexpr = 0):
    # QUANT: x (M, K) bf16 rows sxm apart, quantized here per (row, 128-block) as the GEMM reads it (sx unused);
    #   else x = e4m3 codes (M, K) and sx (M, K/128) fp32 UE8M0 scales from act_quant_fp8.
    # w (N, K) e4m3; ws (ceil(N/128), K/128) uint8 e8m0 bits; out (M, N) bf16.
    # SPLIT > 1: fp32 partials go to part (S, M, N); with REDUCE the last program of an output tile to arrive
    #   (cnt: one int32 ticket per tile, zero between launches) sums them in split order 0..S-1, writes bf16
    #   and resets the ticket; without REDUCE a second launch (_splitk_reduce_kernel) does the sum.
    pid_n, pid_s, pid_m = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    rn = pid_n * BN + tl.arange(0, BN)
    rm = pid_m * BM + tl.arange(0, BM)
    mmask = rm < M
    nmask = rn < N
    if QUANT:
        ldx = sxm                                     # bf16 x may be a row-strided view
    else:
        ldx = K                                       # codes from act_quant_fp8 are contiguous
    acc = fp8_gemm_tile(x_ptr, sx_ptr, w_ptr, ws_ptr, rn, rm, mmask, nmask, (pid_n * BN) // 128, K, ldx,
                        pid_s * KB_SPLIT, KB_SPLIT, BM, BN, QUANT, HW_CVT, STAGED, PROMOTE)
    ticket = cnt_ptr + pid_m * tl.num_programs(0) + pid_n
    splitk_store(acc, out_ptr, part_ptr, ticket, rm[None, :] * N + rn[:, None], nmask[:, None] & mmask[None, :],
                 pid_s, M * N, SPLIT, REDUCE, True, RNE_FIX)


@triton.jit
def fp4_tile_dot(acc, w_ptr, s_ptr, rn, LDW, LDS, kb, x_ptr, rows, rmask, LDX, DOT_UPCAST: tl.constexpr):
    """acc (BN, BM) += W[rn, 128 kb : 128 kb + 128] . X[rows, same]^T. W: packed e2m1 rows of LDW bytes with
    e8m0 scale rows of LDS bytes; X: bf16 rows of LDX values (already fp8-simulated: exact e4m3 * 2^k).
    Even and odd k go to two dots, so the packed bytes never need interleaving."""
    rj = tl.arange(0, 64)
    b = tl.load(w_ptr + rn[:, None] * LDW + kb * 64 + rj[None, :]).to(tl.int32)             # (BN, 64)
    sexp = tl.load(s_ptr + rn[:, None] * LDS + kb * 4 + rj[None, :] // 16).to(tl.int32) - 127
    xrow = x_ptr + rows[:, None].to(tl.int64) * LDX + kb * 128 + 2 * rj[None, :]
    xe = tl.load(xrow, mask=rmask[:, None], other=0.0)                                        # (BM, 64)
    xo = tl.load(xrow + 1, mask=rmask[:, None], other=0.0)
    acc = tl.dot(dot_operand(fp4_decode_bf16(b & 15, sexp), DOT_UPCAST), dot_operand(tl.trans(xe), DOT_UPCAST), acc)
    acc = tl.dot(dot_operand(fp4_decode_bf16(b >> 4, sexp), DOT_UPCAST), dot_operand(tl.trans(xo), DOT_UPCAST), acc)
    return acc


@triton.jit
def fp4_tile_dot_fp8(acc, w_ptr, s_ptr, rn, LDW, LDS, kb, xq_ptr, sx_ptr, rows, rmask, LDX, ASM: tl.constexpr = False):
    """Same product as fp4_tile_dot with the cheap decode: acc (BN, BM) += W[rn, 128 kb : +128] . X[rows, same]^T
    where X is given as e4m3 codes xq (rows of LDX) with fp32 UE8M0 scales sx (rows of LDX / 128): the act-quant
    of the spec's fp4 GEMM, the same values as the bf16 fp8-simulated X. Each byte becomes two e4m3 codes
    (value / 64, kernels/quant.py fp4_lo_e4m3 / fp4_hi_e4m3), interleaved back to k order (join + reshape), and
    one fp8 x fp8 dot per 32-wide scale group (fp8 MMA k = 32): acc += dot * (sw[n] * 64) * sx[m]."""
    BN: tl.constexpr = rn.shape[0]
    rq = tl.arange(0, 4)
    r4 = tl.arange(0, 4).to(tl.uint32)
    rk = tl.arange(0, 32)
    xrow = xq_ptr + rows[:, None].to(tl.int64) * LDX + kb * 128 + rk[None, :]
    sx = tl.load(sx_ptr + rows.to(tl.int64) * (LDX // 128) + kb, mask=rmask, other=0.0)    # (BM,)
    kacc = tl.zeros(acc.shape, dtype=tl.float32)
    for g in tl.static_range(4):
        if ASM:     # compiled only (the wrapper passes ASM = False under the interpreter): same word ops in PTX on
            # 4 packed bytes per register, no byte split (sm_90 moe BN 64: K loop up 720 -> 524, down 401 -> 307)
            b = tl.load(w_ptr + rn[:, None] * LDW + kb * 64 + g * 16 + tl.arange(0, 16)[None, :])   # (BN, 16)
            lo, hi = tl.inline_asm_elementwise(
                "{.reg .b32 t; shl.b32 t, $2, 2; and.b32 $0, t, 0x1C1C1C1C; shl.b32 t, $2, 4; and.b32 t, t, "
                "0x80808080; or.b32 $0, $0, t; shr.b32 t, $2, 2; and.b32 t, t, 0x1C1C1C1C; and.b32 $1, $2, "
                "0x80808080; or.b32 $1, $1, t;}", "=r,=r,r", [b], dtype=(tl.uint8, tl.uint8), is_pure=True, pack=4)
            w = tl.reshape(tl.join(lo, hi), (BN, 32)).to(tl.float8e4nv, bitcast=True)
        else:
            wp = (w_ptr + rn[:, None] * LDW + kb * 64 + g * 16).to(tl.pointer_type(tl.uint32))
            q = tl.load(wp + rq[None, :])                                                     # (BN, 4) words
            lo = ((q << 2) & 0x1C1C1C1C) | ((q << 4) & 0x80808080)
            hi = ((q >> 2) & 0x1C1C1C1C) | (q & 0x80808080)
            lo = ((lo[:, :, None] >> (8 * r4)[None, None, :]) & 0xFF).to(tl.uint8)            # (BN, 4, 4)
            hi = ((hi[:, :, None] >> (8 * r4)[None, None, :]) & 0xFF).to(tl.uint8)
            w = tl.reshape(tl.join(lo, hi), (BN, 32)).to(tl.float8e4nv, bitcast=True)
        sw = pow2(tl.load(s_ptr + rn * LDS + kb * 4 + g).to(tl.int32) - 121)                  # 2^(e - 127) * 64
        xq = tl.load(xrow + g * 32, mask=rmask[:, None], other=0.0)                           # (BM, 32) e4m3
        kacc += tl.dot(w, tl.trans(xq)) * sw[:, None]
    return acc + kacc * sx[None, :]


@triton.jit
def _fp4_gemm_kernel(x_ptr, sx_ptr, w_ptr, ws_ptr, out_ptr, M, N, K,
                     KB_SPLIT: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, SPLIT: tl.constexpr,
                     FP8_DOT: tl.constexpr, DOT_UPCAST: tl.constexpr, RNE_FIX: tl.constexpr):
    # x (M, K) bf16 fp8-simulated (group 128), or with FP8_DOT e4m3 codes and sx (M, K/128) fp32 scales;
    # w (N, K/2) uint8 e2m1 pairs; ws (N, K/32) uint8 e8m0 bits
    pid_n, pid_s, pid_m = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    rn = pid_n * BN + tl.arange(0, BN)
    rm = pid_m * BM + tl.arange(0, BM)
    rn_safe = tl.minimum(rn, N - 1)                   # loads stay in bounds; the store is masked
    kb0 = pid_s * KB_SPLIT
    acc = tl.zeros((BN, BM), dtype=tl.float32)
    for i in tl.range(0, KB_SPLIT):
        if FP8_DOT:
            acc = fp4_tile_dot_fp8(acc, w_ptr, ws_ptr, rn_safe, K // 2, K // 32, kb0 + i, x_ptr, sx_ptr, rm, rm < M, K)
        else:
            acc = fp4_tile_dot(acc, w_ptr, ws_ptr, rn_safe, K // 2, K // 32, kb0 + i, x_ptr, rm, rm < M, K, DOT_UPCAST)
    omask = (rn < N)[:, None] & (rm < M)[None, :]
    if SPLIT == 1:
        tl.store(out_ptr + rm[None, :] * N + rn[:, None], to_bf16(acc, RNE_FIX), mask=omask)
    else:
        tl.store(out_ptr + pid_s * M * N + rm[None, :] * N + rn[:, None], acc, mask=omask)


@triton.jit
def bf16_gemv_span(x_row, w_ptr, rn, nmask, swn, K, kb0, ITERS: tl.constexpr, NB: tl.constexpr, BN: tl.constexpr,
                   BK: tl.constexpr, ws_rows=None, W_FP8: tl.constexpr = False):
    """(BN,) fp32: one bf16 row x_row (K,) against w[rn, BK kb0 : BK (kb0 + ITERS NB)] (rows swn apart), no
    tensor cores: each step loads one (BN, NB, BK) weight tile (all its bytes in flight together), one fp32 FMA
    per weight (bf16 products are exact), summed over the tile's K. W_FP8: w holds e4m3 codes and ws_rows (BN,)
    points at each row's power-of-two block scales (one per BK columns); a block's sum is scaled after it, which
    equals summing the bf16 weights codes x scale (prepare_wo_a: exact) bit for bit."""
    rj = tl.arange(0, NB)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BN,), dtype=tl.float32)
    for i in tl.range(0, ITERS):
        k = (kb0 + i * NB + rj)[:, None] * BK + rk[None, :]                       # (NB, BK)
        kmask = k < K
        w = tl.load(w_ptr + rn[:, None, None] * swn + k[None, :, :], mask=nmask[:, None, None] & kmask[None, :, :],
                    other=0.0)
        xv = tl.load(x_row + k, mask=kmask, other=0.0).to(tl.float32)
        if W_FP8:
            kb = kb0 + i * NB + rj
            s = tl.load(ws_rows[:, None] + kb[None, :], mask=nmask[:, None] & (kb * BK < K)[None, :], other=0.0)
            acc += tl.sum(tl.sum(w.to(tl.float32) * xv[None, :, :], axis=2) * s, axis=1)
        else:
            acc += tl.sum(tl.sum(w.to(tl.float32) * xv[None, :, :], axis=2), axis=1)
    return acc


@triton.jit
def _bf16_gemm_kernel(x_ptr, w_ptr, out_ptr, part_ptr, cnt_ptr, M, N, K, G,
                      sxm, sxg, swg, swn, som, sog, PART_STRIDE,
                      KB_SPLIT: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, SPLIT: tl.constexpr,
                      OUT_BF16: tl.constexpr, REDUCE: tl.constexpr, DOT_UPCAST: tl.constexpr, RNE_FIX: tl.constexpr,
                      NB: tl.constexpr = 1, PDL: tl.constexpr = False, ws_ptr=None, ssg=0, ssn=0,
                      W_FP8: tl.constexpr = False):
    # x[m, g, k] at m*sxm + g*sxg + k (bf16); w[g, n, k] at g*swg + n*swn + k (bf16, or W_FP8: e4m3 codes with
    # fp32 power-of-two scales ws[g, n // BK, k // BK] at g*ssg + (n // BK)*ssn + k // BK, prepare_wo_a);
    # out[m, g, n] at m*som + g*sog + n; SPLIT > 1: fp32 partials at the same offsets + s*PART_STRIDE in part,
    # with REDUCE summed in split order by the last program of each tile to arrive (as _fp8_linear_kernel).
    # BM == 1: one row per program, fp32 FMA dot (bf16_gemv_span, NB K blocks a step); else tl.dot tiles.
    pid_n, pid_s, pid_mg = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    n_mt = tl.cdiv(M, BM)
    g = pid_mg // n_mt
    rn = pid_n * BN + tl.arange(0, BN)
    kb0 = pid_s * KB_SPLIT
    ws_rows = ws_ptr + g * ssg + (rn // BK) * ssn if W_FP8 else None
    esz: tl.constexpr = 1 if W_FP8 else 2
    # PDL (pdl_args checks 16-byte rows): the program's weight span, its last split cut at K
    l2_prefetch_rows(w_ptr + g * swg, rn, rn < N, esz * swn, esz * kb0 * BK,
                     esz * tl.minimum(KB_SPLIT * BK, K - kb0 * BK), PDL)
    pdl_enter(PDL)
    if BM == 1:
        row = pid_mg % n_mt
        acc = bf16_gemv_span(x_ptr + row * sxm + g * sxg, w_ptr + g * swg, rn, rn < N, swn, K, kb0, KB_SPLIT // NB,
                             NB, BN, BK, ws_rows, W_FP8)
        ooff = row * som + g * sog + rn
        omask = rn < N
    else:
        rm = (pid_mg % n_mt) * BM + tl.arange(0, BM)
        rk = tl.arange(0, BK)
        acc = tl.zeros((BN, BM), dtype=tl.float32)
        for i in tl.range(0, KB_SPLIT):               # the wrapper makes S divide the K blocks
            kb = kb0 + i
            k = kb * BK + rk
            kmask = k < K
            x = tl.load(x_ptr + rm[:, None] * sxm + g * sxg + k[None, :], mask=(rm < M)[:, None] & kmask[None, :],
                        other=0.0)
            w = tl.load(w_ptr + g * swg + rn[:, None] * swn + k[None, :], mask=(rn < N)[:, None] & kmask[None, :],
                        other=0.0)
            if W_FP8:       # the bf16 weights exactly (codes x power-of-two scale), then the same dot
                w = (w.to(tl.float32) * tl.load(ws_rows + kb, mask=rn < N, other=0.0)[:, None]).to(tl.bfloat16)
            acc = tl.dot(dot_operand(w, DOT_UPCAST), dot_operand(tl.trans(x), DOT_UPCAST), acc)
        ooff = rm[None, :] * som + g * sog + rn[:, None]
        omask = (rn < N)[:, None] & (rm < M)[None, :]
    ticket = cnt_ptr + pid_mg * tl.num_programs(0) + pid_n
    splitk_store(acc, out_ptr, part_ptr, ticket, ooff, omask, pid_s, PART_STRIDE, SPLIT, REDUCE, OUT_BF16, RNE_FIX)


@triton.jit
def _splitk_reduce_kernel(part_ptr, out_ptr, NUMEL, SPLIT: tl.constexpr, OUT_BF16: tl.constexpr,
                          BLOCK: tl.constexpr, RNE_FIX: tl.constexpr):
    # part (S, NUMEL) fp32 -> out (NUMEL,) bf16 / fp32, summed in order s = 0..S-1 (deterministic)
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < NUMEL
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for s in tl.static_range(SPLIT):
        acc += tl.load(part_ptr + s * NUMEL + offs, mask=mask, other=0.0)
    if OUT_BF16:
        tl.store(out_ptr + offs, to_bf16(acc, RNE_FIX), mask=mask)
    else:
        tl.store(out_ptr + offs, acc, mask=mask)


# ---- config spaces ---------------------------------------------------------------------------------------------
def _pow2_at_most(n: int) -> int:
    return 1 << max(0, n.bit_length() - 1)


def _split_for(n_tiles: int, kblocks: int) -> int:
    """Enough K splits that ~2 programs run per SM, at least 2 blocks of K per split."""
    want = max(1, (2 * NUM_SMS_TARGET) // max(1, n_tiles))
    return _fit_split(min(_pow2_at_most(want), max(1, kblocks // 2)), kblocks)


def _fit_split(split: int, kblocks: int) -> int:
    """The largest S <= split dividing kblocks (every split then has the same number of K blocks)."""
    split = max(1, min(split, kblocks))
    while kblocks % split:
        split -= 1
    return split


def _fit_nb(nb: int, kblocks: int) -> int:
    """NB (K blocks a GEMV step, a power of two) halved until it divides a split's kblocks: as SPLIT, a config tuned
    for a longer K (a borrowed or nearest-key entry) still runs. Refuses an NB that is no power of two."""
    if nb < 1 or nb & (nb - 1):
        raise ValueError(f"config NB={nb} (K blocks a GEMV step) must be a power of two")
    while kblocks % nb:
        nb //= 2
    return nb


# (BM, BN, num_warps) tiles that compile for sm_120 without spills (triton 3.6, cuobjdump -res-usage, K = 4096:
# REG <= 255 and STACK 0); BN = 128 and BM = 64 with 4 warps spill in the fp8 / bf16 kernels.
FP8_TILES = ((16, 32, 4), (16, 32, 8), (16, 64, 8), (32, 32, 4), (32, 32, 8), (32, 64, 8), (64, 32, 8), (64, 64, 8))
FP4_TILES = ((16, 32, 4), (16, 32, 8), (16, 64, 4), (16, 64, 8), (16, 128, 8), (32, 32, 4), (32, 32, 8), (32, 64, 4),
             (32, 64, 8), (32, 128, 8), (64, 32, 8), (64, 64, 8), (64, 128, 8))
BF16_TILES = ((16, 32, 4), (16, 32, 8), (16, 64, 8), (32, 32, 4), (32, 32, 8), (32, 64, 8))


def _configs(tiles, params: dict) -> list[dict]:
    K = params.get("K", params.get("D", params.get("I", 128)))
    kb = max(1, K // 128)
    return [{"BM": bm, "BN": bn, "SPLIT": s, "num_warps": w, "num_stages": st}
            for bm, bn, w in tiles for s in (1, 2, 4, 8, 16, 32) if s <= kb and kb % s == 0 for st in (2, 3, 4)]


def fp8_configs(params: dict) -> list[dict]:
    return _configs(FP8_TILES, params)


def fp4_default(params: dict) -> dict:
    # DECODE stays "bf16" here: the default tile (16, 64, 8 warps) loses the fp8 decode's gain on sm_90 (loop 421 ->
    # 388 SASS instructions: both warpgroups decode the whole weight tile); (16, 64, 4 warps) + fp8 is 711 -> 410.
    return {**fp8_default(params), "DECODE": "bf16"}


def fp4_configs(params: dict) -> list[dict]:
    # DECODE as in kernels/moe.py moe_configs: "bf16" (fp4_tile_dot) or "fp8" (fp4_tile_dot_fp8)
    return [{**c, "DECODE": d} for d in ("fp8", "bf16") for c in _configs(FP4_TILES, params)]


def bf16_configs(params: dict) -> list[dict]:
    return _configs(BF16_TILES, params)


def _default(M: int, N: int, K: int, big_m_tile: int = 64) -> dict:
    bm = 16 if M <= 16 else (32 if M <= 32 else big_m_tile)
    bn = 64
    tiles = triton.cdiv(N, bn) * triton.cdiv(M, bm)
    return {"BM": bm, "BN": bn, "SPLIT": _split_for(tiles, max(1, K // 128)), "num_warps": 8, "num_stages": 3}


def fp8_default(params: dict) -> dict:
    return _default(params["M"], params["N"], params["K"])


def bf16_default(params: dict) -> dict:
    M = params.get("M", params.get("T"))
    N = params.get("N", params.get("V", params.get("O")))
    K = params.get("K", params.get("D", params.get("I")))
    return _default(M, N, K, big_m_tile=32)


# ---- launch helpers ------------------------------------------------------------------------------------------
def _finish(part, out, split, out_bf16):
    """Sum split-K partials (S, *out.shape) into out (contiguous)."""
    numel = out.numel()
    BLOCK = 1024
    _splitk_reduce_kernel[(triton.cdiv(numel, BLOCK),)](part, out, numel, SPLIT=split, OUT_BF16=out_bf16,
                                                        BLOCK=BLOCK, RNE_FIX=INTERPRET, num_warps=4, num_stages=1)
    return out


def _check_cfg(cfg: dict) -> None:
    if 128 % cfg["BN"]:
        raise ValueError(f"BN={cfg['BN']} must divide the 128-row weight-scale block")


def _check_linear_x(x, K, what):
    check_dtype("x", x, torch.bfloat16)
    if x.dim() != 2 or x.shape[1] != K:
        raise ValueError(f"{what}: x must be [M, {K}], got shape {tuple(x.shape)}")


_TICKETS: dict = {}      # (device, lane) -> int32 split-K tickets, zero between launches (each launch resets its own)


def split_tickets(device: torch.device, n: int) -> torch.Tensor:
    """n zeroed int32 tickets on `device` for the in-kernel split-K reduction, allocated once per device and lane
    (kernels/common.py `lane`; regrown when a launch needs more) outside the hot path: kernels leave every ticket at
    zero, so no memset per launch and the wrapper stays CUDA-graph capturable once warm (warm-up runs before capture
    allocate them). Launches on one lane share them and must not run concurrently; concurrent work (the decoder's
    side stream) runs on another lane."""
    return zeroed_scratch(_TICKETS, device, n, "split-K tickets")


# Largest M whose activation is quantized inside the GEMM (one launch); larger M quantizes in a pre-pass (two
# launches, split-K still reduced in the GEMM). Every program re-quantizes its (BM, 128) x slices, which grows
# with M: on the H200 (2026-12-01, docs/perf/h200-2026-12-01.md) the prologue won at M=1 (wq_a 6.35 vs 8.99 us)
# and lost at M=16 (12.45 vs 9.07 us) and M=64 (13.89 vs 9.98 us).
PROLOGUE_QUANT_MAX_M = 1


def _fp8_linear_shape(x, weight, weight_scale) -> tuple[int, int, int]:
    """fp8_linear's input checks (every implementation): device, dtypes, [N, K] weight with K % 128 == 0, x and
    the block-scale shape; returns (M, N, K)."""
    check_device(x, weight, weight_scale)
    check_dtype("weight", weight, torch.float8_e4m3fn)
    check_dtype("weight_scale", weight_scale, torch.float8_e8m0fnu)
    if weight.dim() != 2 or weight.shape[1] % 128:
        raise ValueError(f"fp8_linear: weight must be [N, K] with K % 128 == 0, got {tuple(weight.shape)}")
    N, K = weight.shape
    _check_linear_x(x, K, "fp8_linear")
    check_shape("weight_scale", weight_scale, (triton.cdiv(N, 128), K // 128))
    return x.shape[0], N, K


def _fp8_linear(x, weight, weight_scale, config, fused: bool):
    """fused: one launch (activation quantization in the GEMM's K loop, split-K reduced by the last program of
    each tile). Not fused: act_quant_fp8 + GEMM + _splitk_reduce_kernel, three launches (the earlier path, kept
    as the `triton_3launch` implementation for side-by-side timing)."""
    M, N, K = _fp8_linear_shape(x, weight, weight_scale)
    cfg = config or lookup("fp8_linear", {"M": M, "N": N, "K": K}, fp8_default({"M": M, "N": N, "K": K}))
    _check_cfg(cfg)
    weight = weight.contiguous()
    ws = weight_scale.contiguous().view(torch.uint8)
    y = torch.empty((M, N), dtype=torch.bfloat16, device=x.device)
    if M == 0:
        return y
    quant_in_gemm = fused and M <= PROLOGUE_QUANT_MAX_M
    if quant_in_gemm:
        if x.stride(1) != 1:
            x = x.contiguous()
        sx = ws                                                             # unused: quantized in the kernel
    else:
        x, sx = _launch_fp8(x, 128, "ue8m0", False, None, "act_quant_fp8")  # (M, K) e4m3, (M, K/128) fp32
    split = _fit_split(cfg["SPLIT"], K // 128)
    grid = (triton.cdiv(N, cfg["BN"]), split, triton.cdiv(M, cfg["BM"]))
    part = y if split == 1 else torch.empty((split, M, N), dtype=torch.float32, device=x.device)
    tickets = split_tickets(x.device, grid[0] * grid[2]) if fused and split > 1 else part
    _fp8_linear_kernel[grid](x, sx, weight, ws, y, part, tickets, M, N, K, x.stride(0), KB_SPLIT=K // 128 // split,
                             BM=cfg["BM"], BN=cfg["BN"], SPLIT=split, QUANT=quant_in_gemm, REDUCE=fused,
                             HW_CVT=not INTERPRET, RNE_FIX=INTERPRET, num_warps=cfg["num_warps"],
                             num_stages=cfg["num_stages"], STAGED=prefetch_staged(cfg), PROMOTE=fp8_promote())
    return y if split == 1 or fused else _finish(part, y, split, True)


@register_impl("fp8_linear", "triton_v1", backend="triton", configs=fp8_configs, default_config=fp8_default,
               kernels=lambda: [_fp8_linear_kernel])
def fp8_linear_v1(x, weight, weight_scale, config=None):
    return _fp8_linear(x, weight, weight_scale, config, fused=True)


@register_impl("fp8_linear", "triton_3launch", backend="triton", configs=fp8_configs, default_config=fp8_default,
               kernels=lambda: [_fp8_linear_kernel, _splitk_reduce_kernel])
def fp8_linear_3launch(x, weight, weight_scale, config=None):
    return _fp8_linear(x, weight, weight_scale, config, fused=False)


# ---- fp8_linear v2: one launch at every M ------------------------------------------------------------------------
@triton.jit
def fp8_gemv_span(x_ptr, w_ptr, ws_ptr, rn, nmask, nb, K, kb0, ITERS: tl.constexpr, NB: tl.constexpr,
                  BN: tl.constexpr, HW_CVT: tl.constexpr):
    """(BN,) fp32: one bf16 row x (K,) against W[rn, 128 kb0 : 128 (kb0 + ITERS NB)] without tensor cores. Each
    step issues the load of a whole (BN, NB, 128) weight tile first (16-byte vectors along K), then quantizes
    the NB x groups it meets (act_quant_e4m3; its cross-warp max waits at barriers while the weight bytes are
    already in flight). The group's two power-of-two scales fold into the decoded codes (xs = q sx sw, exact),
    so every weight byte is one fp32 FMA; the product is summed over the tile's K."""
    rj = tl.arange(0, NB)
    rk = tl.arange(0, 128)
    KB = K // 128
    acc = tl.zeros((BN,), dtype=tl.float32)
    for i in tl.range(0, ITERS):
        kb = kb0 + i * NB + rj                                                     # (NB,) K blocks
        col = kb[:, None] * 128 + rk[None, :]                                      # (NB, 128)
        w = tl.load(w_ptr + rn[:, None, None] * K + col[None, :, :], mask=nmask[:, None, None], other=0.0)
        xv = tl.load(x_ptr + col).to(tl.float32)
        sw = pow2(tl.load(ws_ptr + nb * KB + kb).to(tl.int32) - 127)
        xq, sx = act_quant_e4m3(xv, HW_CVT)                                       # (NB, 128) e4m3, (NB,)
        xs = xq.to(tl.float32) * (sx * sw)[:, None]
        acc += tl.sum(tl.sum(w.to(tl.float32) * xs[None, :, :], axis=2), axis=1)
    return acc


@triton.jit
def _x_block(ptrs, mask, XQ: tl.constexpr):
    """One (BM, 128) block of x: bf16 values, or with XQ e4m3 codes that other programs of the launch stored (past L1)."""
    if XQ:
        return tl.load(ptrs, mask=mask, other=0.0, cache_modifier=".cg")
    return tl.load(ptrs, mask=mask, other=0.0)


@triton.jit
def quantize_x_once(x_ptr, sxm, xq_ptr, sx_ptr, q_ptr, M, K, GQ: tl.constexpr, HW_CVT: tl.constexpr):
    """fp8_linear's XQ "once": the launch's programs quantize x (M, K) bf16 (rows sxm apart) together, once, into
    e4m3 codes xq (M, K) and UE8M0 scales sx (M, K/128) fp32, instead of each program re-quantizing the x slice it
    reads (once per N tile). Each program claims chunks of GQ (row, 128-block) groups from the counter q[0] until none
    is left, counts each finished chunk in q[1], then waits until every chunk is counted. No deadlock: a program
    waits only once every chunk is claimed, and a claimed chunk belongs to a running program that finishes it
    without waiting. The groups quantize with act_quant_e4m3, as the per-tile path does: the same codes."""
    rk = tl.arange(0, 128)
    KB = K // 128
    NG = M * KB
    NQ = (NG + GQ - 1) // GQ
    c = tl.atomic_add(q_ptr, 1, sem="relaxed", scope="gpu")
    while c < NQ:
        g = c * GQ + tl.arange(0, GQ)
        gm = g < NG
        row = (g // KB).to(tl.int64)
        col = (g % KB)[:, None] * 128 + rk[None, :]
        v = tl.load(x_ptr + row[:, None] * sxm + col, mask=gm[:, None], other=0.0).to(tl.float32)
        xq, s = act_quant_e4m3(v, HW_CVT)
        tl.store(xq_ptr + row[:, None] * K + col, xq, mask=gm[:, None])
        tl.store(sx_ptr + g, s, mask=gm)
        tl.debug_barrier()                                           # every thread's stores before the release
        tl.atomic_add(q_ptr + 1, 1, sem="release", scope="gpu")
        c = tl.atomic_add(q_ptr, 1, sem="relaxed", scope="gpu")
    done = tl.atomic_add(q_ptr + 1, 0, sem="acquire", scope="gpu")
    while done < NQ:
        done = tl.atomic_add(q_ptr + 1, 0, sem="acquire", scope="gpu")


@triton.jit
def quantize_x_release(q_ptr):
    """After quantize_x_once and this program's last use of the codes: the launch's last program to arrive (q[2])
    puts the three counters back to zero for the next launch (every program has made its last claim by then)."""
    tl.debug_barrier()
    total = tl.num_programs(0) * tl.num_programs(1) * tl.num_programs(2)
    if tl.atomic_add(q_ptr + 2, 1, sem="acq_rel", scope="gpu") == total - 1:
        tl.atomic_xchg(q_ptr, 0, sem="relaxed", scope="gpu")
        tl.atomic_xchg(q_ptr + 1, 0, sem="relaxed", scope="gpu")
        tl.atomic_xchg(q_ptr + 2, 0, sem="relaxed", scope="gpu")


@triton.jit
def fp8_mma_span(x_ptr, sx_ptr, w_ptr, ws_ptr, rm, rn, mmask, nmask, nb, K, ldx, kb0, KB_SPLIT: tl.constexpr,
                 BM: tl.constexpr, BN: tl.constexpr, XA: tl.constexpr, HW_CVT: tl.constexpr, XQ: tl.constexpr = False,
                 STAGED: tl.constexpr = False, PROMOTE: tl.constexpr = 0):
    """X[rm, 128 kb0 : +128 KB_SPLIT] . W[rn, same]^T on tensor cores, x bf16 quantized per (row, 128-block) in
    registers, both block scales applied to each 128-deep partial. XQ: x is already e4m3 codes (rows ldx apart) with
    their scales sx (M, K/128) fp32, written by other programs of this launch (quantize_x_once): loaded past L1.
    XA: x is the MMA's A operand straight from registers, -> (BM, BN); else W . x^T (x through shared memory; sm_90
    QGMMA 64 x BM), -> (BN, BM). The next block's x is loaded one step ahead into registers (its L2 latency hides
    behind this block's quantization and MMA), and the weight-scale byte in its own step.
    STAGED (config PREFETCH "staged"): x is loaded in its own step, so the compiler's pipeline carries it beside the
    weight tile (sm_90: cp.async into shared memory, num_stages - 1 blocks ahead), and the scale byte is loaded one
    step ahead. The same values in the same arithmetic order: the same result.
    PROMOTE (KERNELBENCH_FP8_PROMOTE, sm_90): the 128-deep dot adds its partial into full fp32 every PROMOTE products
    (32: after each QGMMA) instead of accumulating all 128 in the tensor core's reduced-precision adder (fp8_dot)."""
    rk = tl.arange(0, 128)
    KB = K // 128
    if XA:
        acc = tl.zeros((BM, BN), dtype=tl.float32)
    else:
        acc = tl.zeros((BN, BM), dtype=tl.float32)
    xrow = x_ptr + rm[:, None] * ldx + rk[None, :]
    if STAGED:
        wsrow = ws_ptr + nb * KB
        swb = tl.load(wsrow + kb0)
    else:
        xv = _x_block(xrow + kb0 * 128, mmask[:, None], XQ)
    for i in tl.range(0, KB_SPLIT):
        kb = kb0 + i
        if STAGED:
            xv = _x_block(xrow + kb * 128, mmask[:, None], XQ)
            swn = tl.load(wsrow + kb + 1, mask=i + 1 < KB_SPLIT, other=127)
            sw = pow2(swb.to(tl.int32) - 127)
        else:
            xn = _x_block(xrow + (kb + 1) * 128, mmask[:, None] & (i + 1 < KB_SPLIT), XQ)
        w = tl.load(w_ptr + rn[:, None] * K + kb * 128 + rk[None, :], mask=nmask[:, None], other=0.0)
        if XQ:
            xq = xv
            sx = tl.load(sx_ptr + rm * KB + kb, mask=mmask, other=0.0, cache_modifier=".cg")
        else:
            xq, sx = act_quant_e4m3(xv.to(tl.float32), HW_CVT)                    # (BM, 128), (BM,)
        if not STAGED:
            sw = pow2(tl.load(ws_ptr + nb * KB + kb).to(tl.int32) - 127)
        if XA:
            acc += fp8_dot(xq, tl.trans(w), PROMOTE) * (sx * sw)[:, None]
        else:
            acc += fp8_dot(w, tl.trans(xq), PROMOTE) * (sx * sw)[None, :]
        if STAGED:
            swb = swn
        else:
            xv = xn
    return acc


@triton.jit
def _fp8_linear_v2_kernel(x_ptr, w_ptr, ws_ptr, out_ptr, part_ptr, cnt_ptr, M, N, K, sxm,
                          KB_SPLIT: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, NB: tl.constexpr,
                          XA: tl.constexpr, SPLIT: tl.constexpr, HW_CVT: tl.constexpr, RNE_FIX: tl.constexpr,
                          PDL: tl.constexpr = False, xq_ptr=None, sx_ptr=None, q_ptr=None, XQ: tl.constexpr = False,
                          GQ: tl.constexpr = 16, WPREF: tl.constexpr = False, STAGED: tl.constexpr = False,
                          PROMOTE: tl.constexpr = 0):
    # x (M, K) bf16 rows sxm apart; w (N, K) e4m3; ws (ceil(N/128), K/128) uint8 e8m0 bits; out (M, N) bf16;
    # part (S, M, N) fp32 split-K partials, cnt one int32 ticket per output tile (zero between launches).
    # BM == 1: one row per program, fp32 FMA dot (fp8_gemv_span, one (BN, NB, 128) weight tile a step); else tl.dot
    # on e4m3 codes (fp8_mma_span) with the quantized x as the MMA's A operand (X_OPERAND "A", (BM, BN) tile) or
    # "B" (W . x^T, (BN, BM) tile: on sm_90 BM = 16 still runs on QGMMA 64 x 16, x going through shared memory).
    # XQ (config XQ "once", BM > 1): x quantized once by the launch's programs together (quantize_x_once: codes xq,
    # scales sx, counters q, three int32 zero between launches) before the tiles read it; WPREF: each program first
    # bulk-prefetches its weight span into L2, so the weight stream runs while x is quantized. STAGED (config PREFETCH
    # "staged", BM > 1): x rides the compiler's load pipeline beside the weights, the scale byte one step ahead.
    pid_n, pid_s, pid_m = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    rn = pid_n * BN + tl.arange(0, BN)
    nmask = rn < N
    nb = (pid_n * BN) // 128
    l2_prefetch_rows(w_ptr, rn, nmask, K, pid_s * KB_SPLIT * 128, KB_SPLIT * 128, PDL or WPREF)   # its weights
    pdl_enter(PDL)
    if XQ:
        quantize_x_once(x_ptr, sxm, xq_ptr, sx_ptr, q_ptr, M, K, GQ, HW_CVT)
    if BM == 1:
        acc = fp8_gemv_span(x_ptr + pid_m * sxm, w_ptr, ws_ptr, rn, nmask, nb, K, pid_s * KB_SPLIT,
                            KB_SPLIT // NB, NB, BN, HW_CVT)
        ooff = pid_m * N + rn
        omask = nmask
    else:
        rm = pid_m * BM + tl.arange(0, BM)
        mmask = rm < M
        if XQ:
            acc = fp8_mma_span(xq_ptr, sx_ptr, w_ptr, ws_ptr, rm, rn, mmask, nmask, nb, K, K, pid_s * KB_SPLIT,
                               KB_SPLIT, BM, BN, XA, HW_CVT, True, STAGED, PROMOTE)
        else:
            acc = fp8_mma_span(x_ptr, x_ptr, w_ptr, ws_ptr, rm, rn, mmask, nmask, nb, K, sxm, pid_s * KB_SPLIT,
                               KB_SPLIT, BM, BN, XA, HW_CVT, False, STAGED, PROMOTE)
        if XA:
            ooff = rm[:, None] * N + rn[None, :]
            omask = mmask[:, None] & nmask[None, :]
        else:
            ooff = rm[None, :] * N + rn[:, None]
            omask = nmask[:, None] & mmask[None, :]
    splitk_store(acc, out_ptr, part_ptr, cnt_ptr + pid_m * tl.num_programs(0) + pid_n, ooff, omask, pid_s, M * N,
                 SPLIT, True, True, RNE_FIX)
    if XQ:
        quantize_x_release(q_ptr)


# (BM, BN, num_warps): BM = 1 is the FMA GEMV (one row per program, M <= GEMV_MAX_M), BM >= 16 the tl.dot tile.
FP8_V2_TILES = ((1, 32, 4), (1, 64, 4), (1, 64, 8), (1, 128, 8), (16, 64, 4), (16, 128, 4), (16, 128, 8),
                (32, 64, 4), (32, 128, 8), (64, 64, 4), (64, 128, 8))
GEMV_MAX_M = 1        # M <= this: the FMA GEMV (the weight is re-read from L2 once per row above one row)
V2_PROGRAMS_PER_SM = 2


def _gemv_split(tiles: int, kblocks: int, per_sm: int, nb_max: int = 4) -> tuple[int, int]:
    """(SPLIT, NB) for the GEMV: one step per program (NB = the K blocks of a split, all loaded at once), NB as large
    as possible (<= nb_max) while the grid keeps at least per_sm * 3/4 programs per SM."""
    nb = nb_max
    while nb > 1 and (kblocks % nb or tiles * (kblocks // nb) < (3 * per_sm * NUM_SMS_TARGET) // 4):
        nb //= 2
    return max(1, kblocks // nb), nb


# The GEMM family is part of the `triton` config space (PATH): "v2" the K-loop-quantizing kernel above, "v1" the
# earlier family (_fp8_linear: the act_quant pre-pass above PROLOGUE_QUANT_MAX_M rows, W . x^T tiles, split-K reduced
# in the GEMM). A tuned entry picks it per (M, N, K); without one, V1_MIN_M / V1_MIN_K below decide (fp8_v2_default).
# H200, 2026-12-01 (docs/perf/h200-2026-12-01-session4.md, same run, us v2 / v1): v1 won at C=64 for K = 4096
# (512 x 4096 11.94 / 10.17, 1024 x 4096 13.45 / 11.79, 4096 x 4096 17.30 / 14.99, 2048 x 4096 12.60 / 12.44), v2 at
# C=64 for K <= 2048 (4096 x 1024 8.59 / 10.47, 1024 x 1024 6.55 / 6.84) and at every C=1 and C=16 shape.
FP8_PATHS = ("v2", "v1")
V1_MIN_M = 33         # C=64 measured, C=16 not: the v1 family from the BM = 64 tiles up
V1_MIN_K = 4096


def fp8_v2_default(params: dict, per_sm: int = V2_PROGRAMS_PER_SM) -> dict:
    """PATH "v1" (fp8_default's tile) at M >= V1_MIN_M and K >= V1_MIN_K. Else PATH "v2": M <= GEMV_MAX_M: GEMV
    programs of BN = 64 rows x NB <= 4 K blocks (up to 32 KB of weights, loaded at once), K split so that about
    per_sm programs run per SM. Larger M: BM 16/32/64 x BN 64 tl.dot tiles, x the B operand
    below BM 64 (sm_90: QGMMA 64 x BM, where x as A would need BM >= 64 or an fp16 upcast)."""
    M, N, K = params["M"], params["N"], params["K"]
    kb = max(1, K // 128)
    if M >= V1_MIN_M and K >= V1_MIN_K:
        return {**fp8_default(params), "PATH": "v1"}
    if M <= GEMV_MAX_M:
        split, nb = _gemv_split(triton.cdiv(N, 64) * M, kb, per_sm)
        return {"BM": 1, "BN": 64, "NB": nb, "X_OPERAND": "B", "SPLIT": split, "num_warps": 8, "num_stages": 1,
                "PATH": "v2"}
    bm = 16 if M <= 16 else 32 if M <= 32 else 64
    tiles = triton.cdiv(N, 64) * triton.cdiv(M, bm)
    split = _fit_split(_pow2_at_most(max(1, (per_sm * NUM_SMS_TARGET) // tiles)), kb)
    return {"BM": bm, "BN": 64, "NB": 1, "X_OPERAND": "A" if bm == 64 else "B", "SPLIT": split,
            "num_warps": 8 if bm == 64 else 4, "num_stages": 3, "PATH": "v2"}     # BM 64 with 4 warps spills on sm_120


def fp8_path_configs(params: dict) -> list[dict]:
    """The `triton` space: the v2 family's tiles (fp8_v2_configs) and the v1 family's (fp8_configs), by PATH; the v1
    tiles at 3 stages also with their scales a step ahead (PREFETCH "staged"), for the tuner to weigh."""
    v1 = fp8_configs(params)
    return ([{**c, "PATH": "v2"} for c in fp8_v2_configs(params)]
            + [{**c, "PATH": "v1"} for c in v1]
            + [{**c, "PATH": "v1", "PREFETCH": "staged"} for c in v1 if c["num_stages"] == 3])


def fp8_v2_configs(params: dict) -> list[dict]:
    M = params.get("M", 1)
    kb = max(1, params.get("K", 128) // 128)
    out = []
    for bm, bn, w in FP8_V2_TILES:
        if (bm == 1) != (M <= GEMV_MAX_M):
            continue
        for s in (1, 2, 4, 8, 16, 32):
            if s > kb or kb % s:
                continue
            for nb in ((1, 2, 4, 8) if bm == 1 else (1,)):
                if (kb // s) % nb == 0:
                    out += [{"BM": bm, "BN": bn, "NB": nb, "X_OPERAND": xo, "SPLIT": s, "num_warps": w,
                             "num_stages": st} for xo in (("B",) if bm == 1 else ("A", "B")) for st in ((1,) if bm == 1 else (2, 3, 4))]
                    if bm > 1:      # x quantized once by the launch (config XQ), and x staged with the weights (config
                        # PREFETCH): at 3 stages only, for the tuner to weigh
                        out += [{"BM": bm, "BN": bn, "NB": 1, "X_OPERAND": xo, "SPLIT": s, "num_warps": w,
                                 "num_stages": 3, **opt} for xo in ("A", "B")
                                for opt in ({"XQ": "once"}, {"PREFETCH": "staged"})]
    return out


def _gemv_simt(cfg: dict, params: dict | None = None) -> str | None:
    return ("BM = 1: an FMA GEMV, one fp32 FMA per weight byte (a tensor-core tile would pad the row to 16 or 64)"
            if cfg.get("BM") == 1 else None)


@register_impl("fp8_linear", "triton", backend="triton", configs=fp8_path_configs, default_config=fp8_v2_default,
               kernels=lambda: [_fp8_linear_v2_kernel, _fp8_linear_kernel, _fp8_quant_kernel], simt=_gemv_simt)
def fp8_linear(x, weight, weight_scale, config=None):
    """PATH "v2": one launch at every M, x quantized where the GEMM reads it, split-K reduced by each tile's last
    program; PATH "v1": the `triton_v1` implementation's code (_fp8_linear)."""
    M, N, K = _fp8_linear_shape(x, weight, weight_scale)
    key = {"M": M, "N": N, "K": K}
    cfg = config or lookup("fp8_linear", key, fp8_v2_default(key))
    path = cfg.get("PATH", "v2")
    if path not in FP8_PATHS:
        raise ValueError(f"fp8_linear: PATH={path!r} must be one of {', '.join(FP8_PATHS)}")
    if path == "v1":
        if cfg.get("XQ", "tile") != "tile":       # v1 quantizes x in a pre-pass: a pin of XQ would be ignored
            raise ValueError(f"fp8_linear: config XQ={cfg['XQ']!r} is the v2 tiles' (PATH 'v2'); PATH 'v1' "
                             f"quantizes x in its own pre-pass")
        return _fp8_linear(x, weight, weight_scale, cfg, fused=True)
    _check_cfg(cfg)
    bm = cfg["BM"]
    if bm != 1 and bm < 16:
        raise ValueError(f"fp8_linear: BM={bm} must be 1 (GEMV) or at least 16 (the MMA tile)")
    y = torch.empty((M, N), dtype=torch.bfloat16, device=x.device)
    if M == 0:
        return y
    if x.stride(1) != 1:
        x = x.contiguous()
    weight = weight.contiguous()
    ws = weight_scale.contiguous().view(torch.uint8)
    kb = K // 128
    split = _fit_split(cfg["SPLIT"], kb)
    nb = _fit_nb(cfg.get("NB", 1), kb // split) if bm == 1 else 1
    grid = (triton.cdiv(N, cfg["BN"]), split, M if bm == 1 else triton.cdiv(M, bm))
    part = y if split == 1 else torch.empty((split, M, N), dtype=torch.float32, device=x.device)
    once = _x_quant_option(cfg) == "once"
    staged = prefetch_staged(cfg)
    nt = grid[0] * grid[2]                                  # split-K tickets, then XQ "once"'s three counters
    tickets = split_tickets(x.device, nt + (3 if once else 0)) if split > 1 or once else part
    xq_args = {}
    if once:
        xq_args = dict(xq_ptr=torch.empty((M, K), dtype=torch.float8_e4m3fn, device=x.device),
                       sx_ptr=torch.empty((M, kb), dtype=torch.float32, device=x.device), q_ptr=tickets[nt:],
                       XQ=True, GQ=XQ_GROUPS, WPREF=sm90_compiled(x.device) and bulk_rows_ok(weight))
    _fp8_linear_v2_kernel[grid](x, weight, ws, y, part, tickets, M, N, K, x.stride(0), KB_SPLIT=kb // split, BM=bm,
                                BN=cfg["BN"], NB=nb, XA=cfg.get("X_OPERAND", "A") == "A", SPLIT=split, HW_CVT=not INTERPRET, RNE_FIX=INTERPRET,
                                num_warps=cfg["num_warps"], num_stages=cfg["num_stages"], **pdl_args(x.device, M, weight),
                                STAGED=staged, PROMOTE=fp8_promote(), **xq_args)
    return y


XQ_GROUPS = 16      # XQ "once": (row, 128-block) groups a program quantizes per claimed chunk (4 KB of bf16 x)
# XQ "once" measured (H100, session 35 call 10, same inputs and tile; data/h200-2026-12-05-session35/call10): slower
# at M = 16 (8.57 -> 15.85, 8.22 -> 20.94, 11.49 -> 23.63 us at N x K = 2048 x 4096, 4096 x 2048, 4096 x 4096) and at
# M = 64, 4096 x 2048 (12.08 -> 15.18); its two M = 64, K = 4096 rows ran PATH v1's default without XQ (a --try pin
# went over the default then: corrected in session 36). Every program waits for the last chunk, spinning on an atomic
# counter. Opt-in, in the config space for the tuner to weigh per key; not a default.


def _x_quant_option(cfg: dict) -> str:
    """Config XQ of the v2 MMA tiles (BM > 1): "tile" (the default: each program quantizes the x slice it reads, in
    its K loop) or "once" (the launch quantizes x once, quantize_x_once, and the tiles read codes; each program first
    prefetches its weight span into L2 on sm_90+). Not for the BM = 1 GEMV, whose one row quantizes once anyway."""
    mode = cfg.get("XQ", "tile")
    if mode not in ("tile", "once"):
        raise ValueError(f"fp8_linear: config XQ={mode!r}: 'tile' or 'once'")
    if mode == "once" and cfg["BM"] == 1:
        raise ValueError("fp8_linear: config XQ 'once' is for the MMA tiles (BM >= 16); the BM = 1 GEMV quantizes "
                         "its row once already")
    return mode


PREFETCH_MODES = ("next", "staged")


def prefetch_staged(cfg: dict, op: str = "fp8_linear") -> bool:
    """Config PREFETCH of the MMA tiles (BM > 1) -> whether it is "staged". "next" (the default): v2 loads x one
    128-block ahead in registers, and every tile loads its scales in their own step. "staged": v2's x through the
    compiler's load pipeline (num_stages - 1 blocks ahead) and the scales one step ahead (fp8_mma_span,
    fp8_gemm_tile STAGED), in fp8_linear's v2 and v1 tiles and the fused-epilogue GEMMs (attention_front,
    attention_q, indexer_q: fp8_rows_tile), each naming itself as `op`. Session 35's Nsight of the 8 MB key at 64
    tokens (data/h200-2026-12-05-session35/call4) stalled on both loads in the K loop; session 36 measured it on an
    H100 (docs/perf/h100-2026-12-05-session36.md). Not for the BM = 1 GEMV, whose one step loads its whole K span."""
    mode = cfg.get("PREFETCH", "next")
    if mode not in PREFETCH_MODES:
        raise ValueError(f"{op}: config PREFETCH={mode!r}: one of {PREFETCH_MODES}")
    if mode == "staged" and cfg["BM"] == 1:
        raise ValueError(f"{op}: config PREFETCH 'staged' is for the MMA tiles (BM >= 16); the BM = 1 GEMV loads "
                         "its whole K span in one step")
    return mode == "staged"


@register_impl("fp4_linear", "triton", backend="triton", configs=fp4_configs, default_config=fp4_default,
               kernels=lambda: [_fp4_gemm_kernel, _splitk_reduce_kernel])
def fp4_linear(x, weight, weight_scale, config=None):
    check_device(x, weight, weight_scale)
    check_dtype("weight", weight, torch.uint8)
    check_dtype("weight_scale", weight_scale, torch.float8_e8m0fnu)
    if weight.dim() != 2 or (2 * weight.shape[1]) % 128:
        raise ValueError(f"fp4_linear: weight must be [N, K/2] with K % 128 == 0, got {tuple(weight.shape)}")
    N, K = weight.shape[0], 2 * weight.shape[1]
    _check_linear_x(x, K, "fp4_linear")
    check_shape("weight_scale", weight_scale, (N, K // 32))
    M = x.shape[0]
    cfg = config or lookup("fp4_linear", {"M": M, "N": N, "K": K}, fp4_default({"M": M, "N": N, "K": K}))
    weight = weight.contiguous()
    ws = weight_scale.contiguous().view(torch.uint8)
    fp8 = cfg.get("DECODE", "bf16") == "fp8" and weight.data_ptr() % 4 == 0     # it reads the weights as words
    if fp8:     # e4m3 codes + fp32 UE8M0 scales (the same values as the simulated bf16)
        x, sx = _launch_fp8(x, 128, "ue8m0", False, None, "act_quant_fp8")
    else:
        x = _launch_fp8(x, 128, "ue8m0", True, None, "fp8_simulate")[0]      # (M, K) bf16 = e4m3 * 2^k exactly
        sx = ws                                                              # unused
    split = _fit_split(cfg["SPLIT"], K // 128)
    kb_split = K // 128 // split
    y = torch.empty((M, N), dtype=torch.bfloat16, device=x.device)
    out = y if split == 1 else torch.empty((split, M, N), dtype=torch.float32, device=x.device)
    grid = (triton.cdiv(N, cfg["BN"]), split, triton.cdiv(M, cfg["BM"]))
    _fp4_gemm_kernel[grid](x, sx, weight, ws, out, M, N, K, KB_SPLIT=kb_split, BM=cfg["BM"], BN=cfg["BN"], SPLIT=split,
                           FP8_DOT=fp8, DOT_UPCAST=INTERPRET, RNE_FIX=INTERPRET, num_warps=cfg["num_warps"],
                           num_stages=cfg["num_stages"])
    return y if split == 1 else _finish(out, y, split, True)


def _bf16_gemm(x3, w3, y3, cfg, out_bf16, ws=None):
    """x3 (M, G, K) view, w3 (G, N, K) contiguous rows, y3 (M, G, N) contiguous -> y3. One launch: split-K
    partials are summed in the kernel by the last program of each tile (tickets as fp8_linear). ws: w3 holds e4m3
    codes and ws (G, ceil(N/128), ceil(K/128)) fp32 their power-of-two block scales (prepare_wo_a)."""
    M, G, K = x3.shape
    N = w3.shape[1]
    BK = 128
    split = _fit_split(cfg["SPLIT"], triton.cdiv(K, BK))
    kb_split = triton.cdiv(K, BK) // split
    part = y3 if split == 1 else torch.empty((split,) + tuple(y3.shape), dtype=torch.float32, device=y3.device)
    nb = _fit_nb(cfg.get("NB", 1), kb_split) if cfg["BM"] == 1 else 1
    grid = (triton.cdiv(N, cfg["BN"]), split, triton.cdiv(M, cfg["BM"]) * G)
    tickets = split_tickets(y3.device, grid[0] * grid[2]) if split > 1 else part
    _bf16_gemm_kernel[grid](x3, w3, y3, part, tickets, M, N, K, G, x3.stride(0), x3.stride(1), w3.stride(0),
                            w3.stride(1), y3.stride(0), y3.stride(1), y3.numel(), KB_SPLIT=kb_split, BM=cfg["BM"],
                            BN=cfg["BN"], BK=BK, SPLIT=split, OUT_BF16=out_bf16, REDUCE=True, DOT_UPCAST=INTERPRET,
                            RNE_FIX=INTERPRET, NB=nb, num_warps=cfg["num_warps"], num_stages=cfg["num_stages"],
                            **pdl_args(y3.device, M, w3), **scale_args(ws))
    return y3


def scale_args(ws) -> dict:
    """The W_FP8 launch keywords of `_bf16_gemm_kernel` / `_attn_wo_a_kernel` for wo_a's block scales ws (None: the
    bf16 build)."""
    if ws is None:
        return {}
    return {"ws_ptr": ws, "ssg": ws.stride(0), "ssn": ws.stride(1), "W_FP8": True}


def _linear_bf16(x, weight, out_dtype, config, op, key, default=None):
    check_device(x, weight)
    check_dtype("x", x, torch.bfloat16)
    check_dtype("weight", weight, torch.bfloat16)
    if x.dim() != 2 or weight.dim() != 2 or x.shape[1] != weight.shape[1]:
        raise ValueError(f"{op}: x [M, K] and weight [N, K] expected, got {tuple(x.shape)} and {tuple(weight.shape)}")
    if out_dtype not in (torch.float32, torch.bfloat16):
        raise ValueError(f"{op}: out_dtype must be torch.float32 or torch.bfloat16, got {out_dtype}")
    M, K = x.shape
    N = weight.shape[0]
    cfg = config or lookup(op, key, default or _default(M, N, K, big_m_tile=32))
    x, weight = x.contiguous(), weight.contiguous()
    y = torch.empty((M, N), dtype=out_dtype, device=x.device)
    _bf16_gemm(x.view(M, 1, K), weight.view(1, N, K), y.view(M, 1, N), cfg, out_dtype == torch.bfloat16)
    return y


@register_impl("bf16_linear", "triton_v1", backend="triton", configs=bf16_configs, default_config=bf16_default,
               kernels=lambda: [_bf16_gemm_kernel])
def bf16_linear_v1(x, weight, out_dtype=torch.float32, config=None):
    return _linear_bf16(x, weight, out_dtype, config, "bf16_linear",
                        {"M": x.shape[0], "N": weight.shape[0], "K": weight.shape[-1]})


@register_impl("lm_head", "triton_v1", backend="triton", configs=bf16_configs, default_config=bf16_default,
               kernels=lambda: [_bf16_gemm_kernel])
def lm_head_v1(x, weight, config=None):
    return _linear_bf16(x, weight, torch.float32, config, "lm_head",
                        {"T": x.shape[0], "V": weight.shape[0], "D": weight.shape[-1]})


# ---- wo_a as FP8: the load-time layout of grouped_wo_a and sparse_attention_wo_a ----------------------------------
# DeepSeek's reference dequantises the checkpoint's FP8 wo_a (e4m3 x UE8M0 per 128 x 128 block, SPEC 2) to bf16 at
# load; the products are the same from the codes and their power-of-two scale, so the kernels read the codes: half
# the bytes of the step's largest bf16 weight (8 -> 4 MB a layer at Flash TP8).
WO_A_BLOCK = 128


def fp8_blocks_exact(w: torch.Tensor, block: int = WO_A_BLOCK):
    """w (G, N, K) bf16 -> (codes (G, N, K) e4m3, scales (G, ceil(N/block), ceil(K/block)) fp32 powers of two)
    with codes * scale == w in every element, or None when a block has no such scale (w is not an FP8
    block-scaled weight). Each block takes the smallest power of two s with max|w| / s <= 448: the checkpoint's
    own scale, or a smaller one when the block's codes stay under 224 (then every code doubles exactly)."""
    g, n, k = w.shape
    nb, kb = -(-n // block), -(-k // block)
    wf = w.float()
    mag = torch.zeros(g, nb * block, kb * block, device=w.device)
    mag[:, :n, :k] = wf.abs()
    amax = mag.view(g, nb, block, kb, block).amax(dim=(2, 4))
    if not bool(torch.isfinite(amax).all()):
        return None
    found = fp8_codes_exact(wf, amax, lambda s: block_scales_full(s, n, k, block))
    return None if found is None else (found[0], found[1].contiguous())


def fp8_codes_exact(x: torch.Tensor, amax: torch.Tensor, expand):
    """x fp32 and its blocks' amax -> (e4m3 codes of x / s, s) with s per block the smallest power of two with
    amax / s <= 448 (1 for a zero or non-finite amax: exact for a bf16 amax, reference.quant ue8m0_scale) and
    expand(s) its per-element form; None unless codes x s gives back every element of x (NaN for NaN). The rule of
    wo_a's codes (`fp8_blocks_exact`) and of the FP8 attention cache (kernels/attention.py pack_fp8_kv)."""
    usable = torch.isfinite(amax) & (amax > 0)
    scale = torch.where(usable, ue8m0_scale(torch.where(usable, amax, 1.0), FP8_MAX), torch.ones_like(amax))
    full = expand(scale)
    codes = (x / full).to(torch.float8_e4m3fn)
    if not gives_back(codes.float() * full, x):
        return None
    return codes, scale


def gives_back(back: torch.Tensor, x: torch.Tensor) -> bool:
    """Whether decoded codes `back` equal x in every element (NaN for NaN): the exactness rule of every packed form
    (fp8_codes_exact, kernels/indexer.py pack_fp4_keys)."""
    return bool(((back == x) | (torch.isnan(back) & torch.isnan(x))).all())


def prepare_wo_a(inputs: dict, name: str) -> dict:
    """Impl.prepare of the wo_a GEMVs: the bf16 weight `name` as e4m3 codes and `name`_scale (fp32 block scales)
    when it is an exact FP8 block-scaled weight (every checkpoint's wo_a is); otherwise unchanged (the bf16 path)."""
    w = inputs.get(name)
    if not isinstance(w, torch.Tensor) or w.dtype != torch.bfloat16 or w.dim() != 3:
        return inputs
    found = fp8_blocks_exact(w)
    if found is None:
        return inputs
    return {**inputs, name: found[0], f"{name}_scale": found[1]}


def check_wo_a_scale(weight: torch.Tensor, scale: torch.Tensor | None, what: str) -> None:
    """The prepared form's checks: e4m3 codes [G, O, I] with fp32 block scales [G, ceil(O/128), ceil(I/128)] on
    their device; without scales a bf16 weight."""
    if scale is None:
        check_dtype(what, weight, torch.bfloat16)
        return
    check_dtype(what, weight, torch.float8_e4m3fn)
    check_dtype(f"{what}_scale", scale, torch.float32)
    if weight.dim() != 3:
        raise ValueError(f"{what} must be [G, O, I], got {tuple(weight.shape)}")
    g, n, k = weight.shape
    check_shape(f"{what}_scale", scale, (g, -(-n // WO_A_BLOCK), -(-k // WO_A_BLOCK)))
    check_device(weight, scale)


@register_impl("grouped_wo_a", "triton_v1", backend="triton", configs=bf16_configs, default_config=bf16_default,
               kernels=lambda: [_bf16_gemm_kernel])
def grouped_wo_a_v1(o, weight, config=None):
    return _grouped_wo_a(o, weight, config, v2=False)


def _grouped_wo_a(o, weight, config, v2, weight_scale=None):
    check_device(o, weight)
    check_dtype("o", o, torch.bfloat16)
    check_wo_a_scale(weight, weight_scale, "weight")
    if o.dim() != 3 or weight.dim() != 3 or o.shape[1] != weight.shape[0] or o.shape[2] != weight.shape[2]:
        raise ValueError(f"grouped_wo_a: o [T, Gl, I] and weight [Gl, O, I] expected, got {tuple(o.shape)} and "
                         f"{tuple(weight.shape)}")
    T, G, I = o.shape
    O = weight.shape[1]
    key = {"T": T, "Gl": G, "O": O, "I": I}
    cfg = config or lookup("grouped_wo_a", key, bf16_v2_default(key) if v2 else bf16_default(key))
    o, weight = o.contiguous(), weight.contiguous()
    z = torch.empty((T, G, O), dtype=torch.bfloat16, device=o.device)
    return _bf16_gemm(o, weight, z, cfg, True, weight_scale)


# ---- bf16 v2: the FMA GEMV at M = 1 ------------------------------------------------------------------------------
BF16_V2_TILES = ((1, 32, 4), (1, 64, 4), (1, 64, 8), (1, 128, 8))


def _mnkg(params: dict) -> tuple[int, int, int, int]:
    M = params.get("M", params.get("T"))
    N = params.get("N", params.get("V", params.get("O")))
    K = params.get("K", params.get("D", params.get("I")))
    return M, N, K, params.get("Gl", 1)


def bf16_v2_default(params: dict, per_sm: int = V2_PROGRAMS_PER_SM) -> dict:
    """M <= GEMV_MAX_M and a weight that needs K splits to fill the GPU but is large enough for >= 3/4 * per_sm
    programs per SM of 32 KB (BN 64 x NB 2 K blocks of bf16, loaded at once): the GEMV. Otherwise bf16_default's
    tensor-core tiles: on the H200 (docs/perf/linear.md) the GEMV won at 8 MB (grouped_wo_a 5.50 vs 6.66 us,
    bf16_linear 1024 x 4096 5.48 vs 6.43) but lost at 2-4 MB (N 256 / 512 x 4096: 5.31 vs 4.67, 5.56 vs 5.21 us),
    and lm_head-sized weights (N tiles alone cover the SMs) were not measured with it."""
    M, N, K, G = _mnkg(params)
    kb = max(1, triton.cdiv(K, 128))
    tiles = triton.cdiv(N, 64) * M * G
    if (M > GEMV_MAX_M or kb % 2 or tiles >= NUM_SMS_TARGET
            or tiles * (kb // 2) < (3 * per_sm * NUM_SMS_TARGET) // 4):
        return bf16_default(params)
    return {"BM": 1, "BN": 64, "NB": 2, "SPLIT": kb // 2, "num_warps": 8, "num_stages": 1}


def bf16_v2_configs(params: dict) -> list[dict]:
    M, _, K, _ = _mnkg(params)
    if M > GEMV_MAX_M:
        return bf16_configs(params)
    kb = max(1, triton.cdiv(K, 128))
    return [{"BM": bm, "BN": bn, "NB": nb, "SPLIT": s, "num_warps": w, "num_stages": st}
            for bm, bn, w in BF16_V2_TILES for s in (1, 2, 4, 8, 16, 32) if s <= kb and kb % s == 0
            for nb in (1, 2, 4) if (kb // s) % nb == 0 for st in (1,)]


@register_impl("bf16_linear", "triton", backend="triton", configs=bf16_v2_configs, default_config=bf16_v2_default,
               kernels=lambda: [_bf16_gemm_kernel])
def bf16_linear(x, weight, out_dtype=torch.float32, config=None):
    key = {"M": x.shape[0], "N": weight.shape[0], "K": weight.shape[-1]}
    return _linear_bf16(x, weight, out_dtype, config, "bf16_linear", key, bf16_v2_default(key))


@register_impl("lm_head", "triton", backend="triton", configs=bf16_v2_configs, default_config=bf16_v2_default,
               kernels=lambda: [_bf16_gemm_kernel])
def lm_head(x, weight, config=None):
    key = {"T": x.shape[0], "V": weight.shape[0], "D": weight.shape[-1]}
    return _linear_bf16(x, weight, torch.float32, config, "lm_head", key, bf16_v2_default(key))


def grouped_wo_a(o, weight, weight_scale=None, config=None):
    """-> z [T, Gl, O] bf16 (reference/linear.py grouped_wo_a). weight bf16, or e4m3 codes with weight_scale
    (prepare_wo_a: the products are the bf16 weight's, bit for bit)."""
    return _grouped_wo_a(o, weight, config, True, weight_scale)


# impl triton reads wo_a as FP8 (prepared at load); triton_bf16 is the same kernel on the bf16 weight, for
# side-by-side timing (kernelbench bench grouped_wo_a --impl triton --impl triton_bf16)
register_impl("grouped_wo_a", "triton", backend="triton", configs=bf16_v2_configs, default_config=bf16_v2_default,
              kernels=lambda: [_bf16_gemm_kernel], prepare=lambda inputs: prepare_wo_a(inputs, "weight"))(grouped_wo_a)
register_impl("grouped_wo_a", "triton_bf16", backend="triton", configs=bf16_v2_configs,
              default_config=bf16_v2_default, kernels=lambda: [_bf16_gemm_kernel])(grouped_wo_a)
