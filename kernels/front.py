"""attention_front and attention_q in one launch each (reference/front.py). attention_front: the wq_a and wkv
projections of x as one FP8 GEMM grid, q_norm and kv_write (kv_norm, RoPE, FP8 simulation, ring write) in the
epilogue. attention_q: the wq_b projection with head_rms_norm_rope in the epilogue (the last tile of each head
to finish normalizes and rotates that head, kernels/rope.py head_rms_rope_rows).

Letters: M tokens, K = D input width, NQ = q_lora_rank, DH head dim, R rope dims, W window, S split-K parts.
Grid (NQ / BN + DH / BN, S, ceil(M / BM)): the first NQ / BN column tiles multiply wq_a, the rest wkv (both
read the same x; K blocks are quantized in the GEMM's K loop at M <= PROLOGUE_QUANT_MAX_M, else by one
act_quant pre-pass as fp8_linear). At one token the default tile is BM 1: fp8_linear's FMA GEMV (kernels/linear.py
fp8_rows_tile), NB K blocks of weights a step, instead of a 16-row tensor-core tile of padding. Each output tile is
finished as in fp8_linear (kernels/linear.py splitk_store: the last split to arrive sums the partials in split
order); the program finishing a tile then
takes the ticket of its half (q or kv) of its row block, and the last of that half's tiles to arrive runs the
half's tail over the BM rows, RB rows at a time: q_norm in place on qr (two passes over NQ in QB-wide chunks),
or kv_write from the raw kv rows (kernels/kv.py kv_write_rows) in place and into the window ring (config TAIL
"launch": both tails in a launch of their own after the GEMM, _attention_front_tail, a program per RB rows). Every
reduction has a fixed order (deterministic); tickets are reset by the program that took the last one, so a
launch needs no memset (CUDA-graph capturable once split_tickets is warm).
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernelbench.kernels import linear as KL
from kernelbench.kernels.common import (INTERPRET, check_device, check_dtype, check_shape, fp8_promote,
                                       l2_prefetch_rows, pdl_args, pdl_enter, to_bf16)
from kernelbench.kernels.kv import kv_write_rows
from kernelbench.kernels.linear import fp8_rows_tile, fp8_tile_head_ticket, splitk_store
from kernelbench.kernels.quant import _launch_fp8
from kernelbench.kernels.rope import _check_kernel_args, _round_to_bf16, head_rms_rope_rows
from kernelbench.reference.rope import check_head_rms_norm_rope
from kernelbench.registry import register_impl
from kernelbench.tuned_configs import lookup


# Config XQ of the fused GEMMs (attention_front, attention_q, indexer_q): where x is quantized above
# PROLOGUE_QUANT_MAX_M rows. "launch" (the default): one act_quant launch first, as fp8_linear's v1 path; "gemm": in
# the GEMM's K loop by every program that reads it (the same codes: act_quant_e4m3, as at one token and in the GEMV),
# one launch fewer, each x group quantized once per N tile. attention_front's default from 16 to 63 rows (its 16-row
# tail tile, in its space); elsewhere an option (registry `options`), set by `--try` or a config. Session 42's
# what-if (the step with the quantization launches skipped) was confounded by the MoE routing; XQ "gemm" measured the
# launch's worth with the right codes in session 43 (attention_front_default).
XQ_MODES = ("launch", "gemm")


def _gemm_activation(x, M: int, unused_scales, cfg: dict, op: str):
    """The fused GEMMs' fp8 activation: at small M, for the BM 1 GEMV tile (it reads bf16 rows and quantizes each
    itself, as fp8_linear's GEMV at any M) and with config XQ "gemm", quantized in the kernel (x as is, rows
    contiguous; `unused_scales` fills the scale argument the kernel then ignores), else by one act_quant pass first
    (as fp8_linear). -> (activation, scales, quantized in the kernel)."""
    mode = cfg.get("XQ", "launch")
    if mode not in XQ_MODES:
        raise ValueError(f"{op}: config XQ={mode!r} must be one of {', '.join(XQ_MODES)}")
    if cfg["BM"] == 1 or M <= KL.PROLOGUE_QUANT_MAX_M or mode == "gemm":
        return (x if x.stride(1) == 1 else x.contiguous()), unused_scales, True
    xq, sx = _launch_fp8(x, 128, "ue8m0", False, None, "act_quant_fp8")
    return xq, sx, False


@triton.jit
def rms_norm_rows(ptr, s_row, rows, rmask, w_ptr, N, eps, QB: tl.constexpr, RNE_FIX: tl.constexpr):
    """In place: rows (RB,) of N bf16 values (s_row apart) -> w * x * rsqrt(mean(x^2) + eps), fp32 math, one
    bf16 rounding (as kernels/norm.py), QB columns at a time (loads bypass L1: other programs wrote them)."""
    base = ptr + rows[:, None].to(tl.int64) * s_row
    ss = tl.zeros((rows.shape[0],), dtype=tl.float32)
    for c0 in range(0, N, QB):
        cols = c0 + tl.arange(0, QB)
        m = rmask[:, None] & (cols < N)[None, :]
        x = tl.load(base + cols[None, :], mask=m, other=0.0, cache_modifier=".cg").to(tl.float32)
        ss += tl.sum(x * x, axis=1)
    r = tl.rsqrt(ss / N + eps)
    for c0 in range(0, N, QB):
        cols = c0 + tl.arange(0, QB)
        m = rmask[:, None] & (cols < N)[None, :]
        x = tl.load(base + cols[None, :], mask=m, other=0.0, cache_modifier=".cg").to(tl.float32)
        w = tl.load(w_ptr + cols, mask=cols < N, other=0.0).to(tl.float32)
        tl.store(base + cols[None, :], to_bf16(w[None, :] * (x * r[:, None]), RNE_FIX), mask=m)


@triton.jit
def rms_norm_rows_once(ptr, s_row, rows, rmask, w, N, eps, QB: tl.constexpr, RNE_FIX: tl.constexpr):
    """rms_norm_rows with the whole row in registers (QB >= N) and the weight w (QB,) fp32 already loaded: one load
    of each row (bypassing L1) instead of two passes of N / QB dependent chunk loads."""
    cols = tl.arange(0, QB)
    m = rmask[:, None] & (cols < N)[None, :]
    ptrs = ptr + rows[:, None].to(tl.int64) * s_row + cols[None, :]
    x = tl.load(ptrs, mask=m, other=0.0, cache_modifier=".cg").to(tl.float32)
    r = tl.rsqrt(tl.sum(x * x, axis=1) / N + eps)
    tl.store(ptrs, to_bf16(w[None, :] * (x * r[:, None]), RNE_FIX), mask=m)


@triton.jit
def _attention_front_kernel(x_ptr, sx_ptr, wq_ptr, wqs_ptr, wkv_ptr, wkvs_ptr, qr_ptr, kv_ptr, part_ptr, cnt_ptr,
                            qn_ptr, kvn_ptr, pos_ptr, seq_ptr, f_ptr, cache_ptr,
                            M, NQ, K, sxm, eps, W, s_cb, s_cw,
                            DH: tl.constexpr, R: tl.constexpr, NG_P2: tl.constexpr,
                            KB_SPLIT: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, SPLIT: tl.constexpr,
                            RB: tl.constexpr, QB: tl.constexpr, QUANT: tl.constexpr, HW_CVT: tl.constexpr,
                            RNE_FIX: tl.constexpr, NB: tl.constexpr = 1, PDL: tl.constexpr = False,
                            STAGED: tl.constexpr = False, Q_ROW: tl.constexpr = False, TAIL: tl.constexpr = True,
                            PROMOTE: tl.constexpr = 0):
    # TAIL False (config TAIL "launch"): the GEMM only (each tile finished, no row tickets); _attention_front_tail
    #   runs the halves' tails in a launch of their own, a program per RB rows and half.
    # Q_ROW (config Q_NORM "row", the default at RB 1; QB >= NQ): the q tail holds each row whole
    #   (rms_norm_rows_once), and every program that finishes a q tile loads q_norm's weight before its row ticket, so
    #   the last one's tail is one dependent load of the row. Else ("chunks") rms_norm_rows: two passes of NQ / QB
    #   chunk loads, each waited on before the next (sm_90 SASS at one token; the weight's chunks in the second pass).
    # x (M, K) bf16 rows sxm apart (QUANT) or e4m3 codes (M, K) + sx (M, K/128) fp32; wq (NQ, K), wkv (DH, K) e4m3
    # with e8m0 scales (N/128, K/128) as uint8; qr (M, NQ), kv (M, DH) bf16; part (S, M, NQ + DH) fp32;
    # cnt: tile tickets (ceil(M/BM) * n_tiles), then per row block a q ticket and a kv ticket
    pid_n, pid_s, pid_m = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    NT = tl.num_programs(0)
    NT_Q = NQ // BN
    rm = pid_m * BM + tl.arange(0, BM)
    mmask = rm < M
    if QUANT:
        ldx = sxm
    else:
        ldx = K
    is_q = pid_n < NT_Q
    if PDL:                                           # the program's weight rows (wq_a or wkv), then the wait
        if is_q:
            rp = pid_n * BN + tl.arange(0, BN)
            l2_prefetch_rows(wq_ptr, rp, rp < NQ, K, pid_s * KB_SPLIT * 128, KB_SPLIT * 128, PDL)
        else:
            rp = (pid_n - NT_Q) * BN + tl.arange(0, BN)
            l2_prefetch_rows(wkv_ptr, rp, rp < DH, K, pid_s * KB_SPLIT * 128, KB_SPLIT * 128, PDL)
    pdl_enter(PDL)
    if is_q:
        rn = pid_n * BN + tl.arange(0, BN)
        acc = fp8_rows_tile(x_ptr, sx_ptr, wq_ptr, wqs_ptr, rn, rm, mmask, rn < NQ, (pid_n * BN) // 128, K, ldx,
                            pid_s * KB_SPLIT, KB_SPLIT, BM, BN, NB, QUANT, HW_CVT, STAGED, PROMOTE)
        out_ptr = qr_ptr
        ooff = rm[None, :] * NQ + rn[:, None]
        row_ticket = cnt_ptr + tl.num_programs(2) * NT + pid_m
        n_half = NT_Q
    else:
        rn = (pid_n - NT_Q) * BN + tl.arange(0, BN)
        acc = fp8_rows_tile(x_ptr, sx_ptr, wkv_ptr, wkvs_ptr, rn, rm, mmask, rn < DH, ((pid_n - NT_Q) * BN) // 128,
                            K, ldx, pid_s * KB_SPLIT, KB_SPLIT, BM, BN, NB, QUANT, HW_CVT, STAGED, PROMOTE)
        out_ptr = kv_ptr
        ooff = rm[None, :] * DH + rn[:, None]
        row_ticket = cnt_ptr + tl.num_programs(2) * (NT + 1) + pid_m
        n_half = NT - NT_Q
    # partials of both halves in one (S, M, NQ + DH) buffer: column pid_n * BN + j
    poff = rm[None, :] * (NQ + DH) + (pid_n * BN + tl.arange(0, BN))[:, None] - ooff
    done = splitk_store(acc, out_ptr, part_ptr + poff, cnt_ptr + pid_m * NT + pid_n, ooff,
                        mmask[None, :] & (rn >= 0)[:, None], pid_s, M * (NQ + DH), SPLIT, True, True, RNE_FIX)
    if TAIL and done:
        tl.debug_barrier()                            # the tile's bf16 stores before the release
        wq_row = 0.0
        if Q_ROW:                                     # q_norm's weight (a kv tile's program loads nothing)
            qc = tl.arange(0, QB)
            wq_row = tl.load(qn_ptr + qc, mask=(qc < NQ) & is_q, other=0.0).to(tl.float32)
        if tl.atomic_add(row_ticket, 1, sem="acq_rel", scope="gpu") == n_half - 1:
            for r0 in range(0, tl.minimum(BM, M - pid_m * BM), RB):
                _half_tail_rows(is_q, pid_m * BM + r0 + tl.arange(0, RB), M, qr_ptr, NQ, qn_ptr, wq_row, kv_ptr,
                                kvn_ptr, pos_ptr, seq_ptr, f_ptr, cache_ptr, eps, W, s_cb, s_cw, DH, R, NG_P2, QB,
                                RNE_FIX, Q_ROW)
            tl.atomic_xchg(row_ticket, 0, sem="relaxed", scope="gpu")


@triton.jit
def _half_tail_rows(is_q, rows, M, qr_ptr, NQ, qn_ptr, wq_row, kv_ptr, kvn_ptr, pos_ptr, seq_ptr, f_ptr, cache_ptr, eps,
                    W, s_cb, s_cw, DH: tl.constexpr, R: tl.constexpr, NG_P2: tl.constexpr, QB: tl.constexpr,
                    RNE_FIX: tl.constexpr, Q_ROW: tl.constexpr):
    """One step of a half's tail over the token rows `rows` (< M), in place: the q half's q_norm on qr (Q_ROW: the
    rows whole, with q_norm's weight wq_row already loaded; else two chunked passes loading it), or the kv half's
    kv_write on kv and into the window ring (their rows written by other programs: loads bypass L1)."""
    if is_q:
        if Q_ROW:
            rms_norm_rows_once(qr_ptr, NQ, rows, rows < M, wq_row, NQ, eps, QB, RNE_FIX)
        else:
            rms_norm_rows(qr_ptr, NQ, rows, rows < M, qn_ptr, NQ, eps, QB, RNE_FIX)
    else:
        kv_write_rows(kv_ptr, DH, rows, rows < M, kvn_ptr, pos_ptr, seq_ptr, f_ptr, kv_ptr, DH, cache_ptr, eps, W, s_cb,
                      s_cw, DH, R, NG_P2, RNE_FIX, ".cg")


@triton.jit
def _attention_front_tail(qr_ptr, kv_ptr, qn_ptr, kvn_ptr, pos_ptr, seq_ptr, f_ptr, cache_ptr, M, NQ, eps, W, s_cb,
                          s_cw, DH: tl.constexpr, R: tl.constexpr, NG_P2: tl.constexpr, RB: tl.constexpr,
                          QB: tl.constexpr, RNE_FIX: tl.constexpr, Q_ROW: tl.constexpr = False,
                          PDL: tl.constexpr = False):
    """Config TAIL "launch": the tails of _attention_front_kernel's two halves after it, grid (ceil(M / RB), 2):
    program (i, 0) q_norm of rows i*RB.. in place on qr, program (i, 1) kv_write of those rows (in place and into the
    window ring). The same helpers on the same rows as the in-kernel tail: the same values."""
    pdl_enter(PDL)
    is_q = tl.program_id(1) == 0
    wq_row = 0.0
    if Q_ROW:                                          # q_norm's weight, loaded by the q programs only
        qc = tl.arange(0, QB)
        wq_row = tl.load(qn_ptr + qc, mask=(qc < NQ) & is_q, other=0.0).to(tl.float32)
    _half_tail_rows(is_q, tl.program_id(0) * RB + tl.arange(0, RB), M, qr_ptr, NQ, qn_ptr, wq_row, kv_ptr, kvn_ptr,
                    pos_ptr, seq_ptr, f_ptr, cache_ptr, eps, W, s_cb, s_cw, DH, R, NG_P2, QB, RNE_FIX, Q_ROW)


def _gemv_rows(m: int) -> bool:
    """Whether M rows take fp8_linear's BM = 1 GEMV: as fp8_linear (GEMV_MAX_M), and only with x quantized in the
    kernel (the GEMV reads bf16 rows)."""
    return m <= min(KL.GEMV_MAX_M, KL.PROLOGUE_QUANT_MAX_M)


def _epilogue_configs(params: dict) -> list[dict]:
    """The tensor-core tiles of fp8_linear's v1 family with RB rows per tail step (those at 3 stages also with their
    scales a step ahead: PREFETCH "staged"), and at one token (x quantized in the GEMM) its BM = 1 FMA GEMV tiles
    (fp8_v2_configs: BN, NB K blocks a step, SPLIT, warps)."""
    k = params.get("K", 128)
    out = [{**c, "RB": rb} for c in KL.fp8_configs({"K": k}) for rb in (1, 4, 16) if rb <= c["BM"]]
    out += [{**c, "PREFETCH": "staged"} for c in out if c["num_stages"] == 3]
    if _gemv_rows(params.get("M", 1)):
        out += [{key: v for key, v in c.items() if key != "X_OPERAND"} | {"RB": 1}
                for c in KL.fp8_v2_configs({"M": 1, "K": k}) if c["BM"] == 1]
    return out


def attention_front_configs(params: dict) -> list[dict]:
    """_epilogue_configs and the default's tile with the other q tail (Q_NORM): at one token "chunks" (the tail
    before session 39), above it "row" (RB 16 rows whole, 64 values a thread at 8 warps: level with "chunks" on the
    H200, session 39 call 7); above the GEMV's rows, each tile of 32 or 64 rows, and the default's 16-row tile (BN 64,
    8 warps), once more with its tails in a launch of their own, 4 rows a program, each row loaded once (config TAIL
    "launch", Q_NORM "row")."""
    out = _epilogue_configs(params)
    tile = _front_tile_default(params)          # the in-kernel tails' default tile, with its other q tail
    if _q_row_fits(tile["RB"], params.get("NQ", 1024), tile["num_warps"]):
        out.append({**tile, "Q_NORM": "chunks" if tile["BM"] == 1 else "row"})
    if _gemv_rows(params.get("M", 1)):
        return out
    tails, seen = [], set()                     # tensor-core tiles with their tails launched
    for c in out:
        tail = {**c, "TAIL": "launch", "RB": 4, "Q_NORM": "row"}
        key = tuple(sorted(tail.items()))
        # BM 32 x BN 32 at 8 warps: the GEMM-only build spills on sm_120 (12 B at SPLIT 4, session 41); of the
        # 16-row tiles only the default's (BN 64, 8 warps: the default's tile from 16 rows, session 42)
        small_8w = (c["BM"], c["BN"], c["num_warps"]) == (32, 32, 8)
        tile16 = (c["BM"], c["BN"], c["num_warps"]) == (16, 64, 8)
        if (c["BM"] >= 32 or tile16) and not small_8w and key not in seen:
            seen.add(key)
            tails.append(tail)
            if tile16:                          # the default from 16 to 63 rows quantizes x in the GEMM
                tails.append({**tail, "XQ": "gemm"})
    return out + tails


# The q tail's row norm (config Q_NORM): "chunks" (rms_norm_rows, two passes of QB = 256-column chunk loads) or "row"
# (the whole rows in registers, one load; at most Q_ROW_VALUES fp32 values a thread: RB rows x NQ rounded up to a
# power of two over the program's threads). Without the key: "row" where a program's tail step is one row (RB 1: the
# one-token GEMV tiles) and fits, else "chunks". H200, session 39 (data/h200-2026-12-06-session39/call3):
# attention_front at one token 8.85 -> 7.90 us, the 43-layer step at C = 1 0.031 ms faster (30 pairs, 95% interval
# +0.022 .. +0.038; A/A control -0.008 .. +0.010).
Q_NORMS = ("chunks", "row")
Q_ROW_VALUES = 64


def _q_row_fits(rb: int, nq: int, num_warps: int) -> bool:
    """Whether RB whole rows of NQ (rounded up to a power of two) take at most Q_ROW_VALUES values a thread."""
    return rb * triton.next_power_of_2(nq) <= Q_ROW_VALUES * 32 * num_warps


def _q_tail(cfg: dict, rb: int, nq: int) -> tuple[bool, int]:
    """(one-pass q tail, QB) of an attention_front config; refuses Q_NORM "row" over Q_ROW_VALUES values a thread."""
    qb = triton.next_power_of_2(nq)
    fits = _q_row_fits(rb, nq, cfg["num_warps"])
    mode = cfg.get("Q_NORM") or ("row" if rb == 1 and fits else "chunks")
    if mode not in Q_NORMS:
        raise ValueError(f"attention_front: config Q_NORM={mode!r} must be one of {', '.join(Q_NORMS)}")
    if mode == "chunks":
        return False, min(256, qb)
    if not fits:
        raise ValueError(f"attention_front: config Q_NORM 'row' holds RB x NQ = {rb} x {qb} values over "
                         f"{32 * cfg['num_warps']} threads, more than {Q_ROW_VALUES} a thread: use 'chunks', a "
                         "smaller RB or more warps")
    return True, qb


def _epilogue_default(m: int, n: int, k: int) -> dict:
    """M = 1: fp8_linear's BM = 1 GEMV (fp8_v2_default's split and NB for these N, K). M > 1: BM = 16 row blocks,
    each finished by its own program (RB = 16 rows at a time): a 64-row block's tail in one program took 57 us per
    attention_front call at C=64 on the H200 (one program per tail, 16 sequential 4-row steps), the GEMM itself
    ~10 us."""
    if _gemv_rows(m):
        gemv = KL.fp8_v2_default({"M": m, "N": n, "K": k})
        return {key: v for key, v in gemv.items() if key not in ("X_OPERAND", "PATH")} | {"RB": 1}
    tiles = triton.cdiv(n, 64) * triton.cdiv(m, 16)
    return {"BM": 16, "BN": 64, "SPLIT": KL._split_for(tiles, max(1, k // 128)), "num_warps": 8, "num_stages": 3,
            "RB": 16}


# From TAIL_LAUNCH_MIN_M rows the default's tails run in a launch of their own (TAIL "launch", RB 4, Q_NORM "row"),
# from BIG_TILE_MIN_M rows on BM 64 row blocks (each weight tile read once), SPLIT 4, 4 stages. H100, session 42
# (data/h100-2026-12-06-session42), the 43-layer step in interleaved pairs (30, A/A control first):
# - 64 tokens, BM 64 / SPLIT 4 / 4 stages: 0.056 ms faster (95% interval +0.044 .. +0.068; call 2), and the old
#   default pinned back 0.060 ms slower (call 9); alone 19.50 -> 15.18 us. BM 32 at SPLIT 4, as fast alone, was 0.074 ms
#   slower in the step;
# - 16 tokens, the BM 16 tile (SPLIT 8) with its tails launched: 0.050 ms faster (+0.043 .. +0.055; call 10); alone
#   14.99 -> 13.31 us. BM 32 / 64 tiles there were within noise.
# Rows 17-63 (the BM 16 tile, tails launched) are not measured; below 16 rows the in-kernel tails stay.
# Below BIG_TILE_MIN_M rows that 16-row tile quantizes x in its K loop (config XQ "gemm", no act_quant launch). H100,
# session 43 (data/h100-2026-12-06-session43/call1, scripts/device_session43b.sh): the step at C = 16 0.044 ms faster
# (30 pairs, 95% interval +0.031 .. +0.053; A/A control +0.000 .. +0.010), bit-equal to the act_quant launch on the
# GPU at 16 and 64 tokens. At 64 tokens XQ "gemm" on all three fused GEMMs (with attention_q's and indexer_q's) made
# the step 0.549 ms slower: each N tile quantizes the whole x again, so the launch stays from 64 rows.
TAIL_LAUNCH_MIN_M = 16
BIG_TILE_MIN_M = 64


def attention_front_default(params: dict) -> dict:
    m, k = params.get("M", 1), params.get("K", 4096)
    tails = {"RB": 4, "Q_NORM": "row", "TAIL": "launch"}
    if m >= BIG_TILE_MIN_M:
        return {"BM": 64, "BN": 64, "SPLIT": KL._fit_split(4, max(1, k // 128)), "num_warps": 8, "num_stages": 4,
                **tails}
    base = _front_tile_default(params)
    return {**base, **tails, "XQ": "gemm"} if m >= TAIL_LAUNCH_MIN_M else base


def _front_tile_default(params: dict) -> dict:
    """attention_front's default tile with in-kernel tails (the default below TAIL_LAUNCH_MIN_M rows)."""
    return _epilogue_default(params.get("M", 1), params.get("NQ", 1024) + params.get("DH", 512),
                             params.get("K", 4096))


@register_impl("attention_front", "triton", backend="triton", configs=attention_front_configs,
               default_config=attention_front_default, kernels=lambda: [_attention_front_kernel, _attention_front_tail],
               simt=KL._gemv_simt, options=frozenset({"XQ"}))
def attention_front(x, wq_a, wq_a_scale, q_norm, wkv, wkv_scale, kv_norm, eps, positions, seq_ids, freqs,
                    window_cache, config=None):
    dev = check_device(x, wq_a, wq_a_scale, q_norm, wkv, wkv_scale, kv_norm, positions, seq_ids, freqs, window_cache)
    for name, t in (("wq_a", wq_a), ("wkv", wkv)):
        check_dtype(name, t, torch.float8_e4m3fn)
    for name, t in (("wq_a_scale", wq_a_scale), ("wkv_scale", wkv_scale)):
        check_dtype(name, t, torch.float8_e8m0fnu)
    for name, t in (("x", x), ("q_norm", q_norm), ("kv_norm", kv_norm), ("window_cache", window_cache)):
        check_dtype(name, t, torch.bfloat16)
    if x.dim() != 2 or wq_a.dim() != 2 or wkv.dim() != 2 or wq_a.shape[1] != x.shape[1] or wkv.shape[1] != x.shape[1]:
        raise ValueError(f"attention_front: x [M, K], wq_a [NQ, K] and wkv [DH, K] expected, got {tuple(x.shape)}, "
                         f"{tuple(wq_a.shape)} and {tuple(wkv.shape)}")
    M, K = x.shape
    NQ, DH = wq_a.shape[0], wkv.shape[0]
    R = 2 * freqs.shape[0]
    if K % 128 or NQ % 128 or DH % 128 or DH & (DH - 1) or not 0 < R < DH or (DH - R) % 64 or R & (R - 1):
        raise ValueError(f"attention_front: need K, NQ, DH multiples of 128, DH and R powers of two, DH - R a "
                         f"multiple of 64; got K={K}, NQ={NQ}, DH={DH}, R={R}")
    check_shape("wq_a_scale", wq_a_scale, (NQ // 128, K // 128))
    check_shape("wkv_scale", wkv_scale, (DH // 128, K // 128))
    check_shape("q_norm", q_norm, (NQ,))
    check_shape("kv_norm", kv_norm, (DH,))
    if window_cache.dim() != 3 or window_cache.shape[2] != DH or window_cache.stride(2) != 1:
        raise ValueError(f"attention_front: window_cache must be [B, W, {DH}] contiguous in the last dim, got "
                         f"{tuple(window_cache.shape)}")
    if positions.dim() != 1 or positions.shape[0] != M or seq_ids.dim() != 1 or seq_ids.shape[0] != M:
        raise ValueError(f"attention_front: positions and seq_ids must be [M={M}]")
    key = {"M": M, "NQ": NQ, "DH": DH, "K": K}
    cfg = config or lookup("attention_front", key, attention_front_default(key))
    KL._check_cfg(cfg)
    tail_launch = _tail_mode(cfg) == "launch"
    rb = cfg.get("RB", 1) if tail_launch else min(cfg.get("RB", 1), cfg["BM"])
    q_row, qb = _q_tail(cfg, rb, NQ)
    qr = torch.empty((M, NQ), dtype=torch.bfloat16, device=dev)
    kv = torch.empty((M, DH), dtype=torch.bfloat16, device=dev)
    if M == 0:
        return qr, kv
    xin, sx, quant_in_gemm = _gemm_activation(x, M, qr, cfg, "attention_front")
    split, nb = _gemm_split(cfg, K, quant_in_gemm, "attention_front")
    bm, bn = cfg["BM"], cfg["BN"]
    grid = ((NQ + DH) // bn, split, triton.cdiv(M, bm))
    part = qr if split == 1 else torch.empty((split, M, NQ + DH), dtype=torch.float32, device=dev)
    tickets = KL.split_tickets(dev, grid[0] * grid[2] + 2 * grid[2])
    ng_p2 = triton.next_power_of_2((DH - R) // 64)        # kv_write's 64-wide groups of the non-RoPE dims
    _attention_front_kernel[grid](
        xin, sx, wq_a.contiguous(), wq_a_scale.contiguous().view(torch.uint8), wkv.contiguous(),
        wkv_scale.contiguous().view(torch.uint8), qr, kv, part, tickets, q_norm.contiguous(), kv_norm.contiguous(),
        positions.contiguous(), seq_ids.contiguous(), freqs.contiguous(), window_cache,
        M, NQ, K, xin.stride(0), float(eps), window_cache.shape[1], window_cache.stride(0), window_cache.stride(1),
        DH=DH, R=R, NG_P2=ng_p2, KB_SPLIT=K // 128 // split, BM=bm, BN=bn,
        SPLIT=split, RB=rb, QB=qb, QUANT=quant_in_gemm, HW_CVT=not INTERPRET, RNE_FIX=INTERPRET, NB=nb,
        STAGED=KL.prefetch_staged(cfg, "attention_front"), PROMOTE=fp8_promote(), Q_ROW=q_row, TAIL=not tail_launch,
        num_warps=cfg["num_warps"], num_stages=cfg["num_stages"], **pdl_args(dev, M, wq_a, wkv))
    if tail_launch:
        _attention_front_tail[(triton.cdiv(M, rb), 2)](
            qr, kv, q_norm.contiguous(), kv_norm.contiguous(), positions.contiguous(), seq_ids.contiguous(),
            freqs.contiguous(), window_cache, M, NQ, float(eps), window_cache.shape[1], window_cache.stride(0),
            window_cache.stride(1), DH=DH, R=R, NG_P2=ng_p2, RB=rb, QB=qb,
            RNE_FIX=INTERPRET, Q_ROW=q_row, num_warps=cfg["num_warps"], num_stages=1, **pdl_args(dev, M))
    return qr, kv


# Config TAIL: where attention_front's two row tails (q_norm, kv_write) run. "ticket" (the default): in the GEMM's
# launch, by the program that finishes a row block's last tile of that half, RB rows a step (so a block of BM rows is
# one program's serial walk: with BM 64 at 64 tokens, 75-108 us in session 41's H100 tune against 19.12 for the BM 16
# default). "launch": a launch of its own after the GEMM, a program per RB rows and half (_attention_front_tail), so
# that row blocks of 32 or 64 (each weight tile read once or twice instead of four times at 64 tokens) keep a
# parallel tail. The default from TAIL_LAUNCH_MIN_M rows (timed there: attention_front_default).
TAILS = ("ticket", "launch")


def _tail_mode(cfg: dict) -> str:
    mode = cfg.get("TAIL", "ticket")
    if mode not in TAILS:
        raise ValueError(f"attention_front: config TAIL={mode!r} must be one of {', '.join(TAILS)}")
    return mode


def _gemm_split(cfg: dict, K: int, quant_in_gemm: bool, op: str) -> tuple[int, int]:
    """(K splits, K blocks per GEMV step) of an epilogue GEMM's config; BM 1 (the GEMV) needs x quantized in the
    kernel (_gemm_activation does so for it at every M) and NB dividing each split's K blocks."""
    split = KL._fit_split(cfg["SPLIT"], K // 128)
    nb = int(cfg.get("NB", 1))
    if cfg["BM"] == 1 and not quant_in_gemm:
        raise ValueError(f"{op}: config BM 1 (the GEMV) reads bf16 x rows: x must be quantized in the kernel")
    if nb < 1 or nb & (nb - 1) or (K // 128 // split) % nb:
        raise ValueError(f"{op}: config NB={nb} must be a power of two dividing the {K // 128 // split} K blocks of "
                         f"each of the {split} splits")
    return split, nb


@triton.jit
def _attention_q_kernel(x_ptr, sx_ptr, w_ptr, ws_ptr, y_ptr, part_ptr, cnt_ptr, pos_ptr, f_ptr,
                        M, N, K, sxm, HL, DH, R2, eps_q,
                        KB_SPLIT: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, SPLIT: tl.constexpr,
                        RB: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_R2: tl.constexpr, QUANT: tl.constexpr,
                        HW_CVT: tl.constexpr, RNE_FIX: tl.constexpr, NB: tl.constexpr = 1, PDL: tl.constexpr = False,
                        HEAD_SUM: tl.constexpr = False, STAGED: tl.constexpr = False, PROMOTE: tl.constexpr = 0):
    # x (M, K) as fp8_linear; y (M, N = HL * DH) bf16; part (S, M, N) fp32; cnt: tile tickets, then one per (row
    # block, head) (kernels/linear.py fp8_tile_head_ticket; HEAD_SUM: the head's ticket only)
    last, ticket, head, pid_m = fp8_tile_head_ticket(x_ptr, sx_ptr, w_ptr, ws_ptr, y_ptr, part_ptr, cnt_ptr, M, N, K,
                                                     sxm, HL, DH, KB_SPLIT, BM, BN, SPLIT, QUANT, HW_CVT, RNE_FIX,
                                                     NB, PDL, HEAD_SUM, BLOCK_D, STAGED, PROMOTE)
    if last:
        for r0 in range(0, tl.minimum(BM, M - pid_m * BM), RB):
            tok = pid_m * BM + r0 + tl.arange(0, RB)
            tmask = tok < M
            pos = tl.load(pos_ptr + tok, mask=tmask, other=0).to(tl.int64)
            head_rms_rope_rows(y_ptr, y_ptr, (tok.to(tl.int64) * HL + head) * DH, tmask, pos, f_ptr, DH, R2,
                               eps_q, BLOCK_D, BLOCK_R2, RNE_FIX, ".cg")
        tl.atomic_xchg(ticket, 0, sem="relaxed", scope="gpu")


# The kernel structure is part of attention_q's config space (PATH, as indexer_q's): "fused" the kernel above (the
# GEMM with the head tail in each head's last tile), "split" the separate kernels (the `triton_parts` code: fp8_linear
# at its own lookup, then head_rms_norm_rope; the entry carries the default's tile keys, unused). H100, session 42
# (data/h100-2026-12-06-session42/call5), us fused / split: 16 tokens 10.72 / 9.15, 64 tokens 12.37 / 11.45.
ATTENTION_Q_PATHS = ("fused", "split")
ATTENTION_Q_PARTS = ("_fp8_quant_kernel", "_fp8_linear_v2_kernel", "_fp8_linear_kernel", "_head_rms_rope_kernel")


def attention_q_configs(params: dict) -> list[dict]:
    return head_sum_configs(_epilogue_configs(params)) + [{**_attention_q_fused_default(params), "PATH": "split"}]


def _attention_q_fused_default(params: dict) -> dict:
    return _epilogue_default(params.get("M", 1), params.get("N", 4096), params.get("K", 1024))


def head_sum_configs(configs: list[dict]) -> list[dict]:
    """A space of fp8_tile_head_ticket GEMMs, and each one-token GEMV tile with split K once more with SPLIT_SUM
    "head" (one ticket stage: kernels/linear.py head_sum_option)."""
    return configs + [{**c, "SPLIT_SUM": "head"} for c in configs if c["BM"] == 1 and c["SPLIT"] > 1]


# PATH "split" is the default from SPLIT_MIN_M to SPLIT_MAX_M rows. The 43-layer step, H200, session 42 (call 6,
# `decode-bench --try 'attention_q={"PATH": "split"}'`, 30 pairs, A/A control first): C = 16 0.038 ms faster (95%
# interval +0.029 .. +0.048; control -0.008 .. +0.006); C = 1 0.021 ms slower (the fused GEMV stays at one token);
# C = 64 within the control's shift (the fused kernel stays). Rows 2-15 and 17-63 are not measured.
SPLIT_MIN_M, SPLIT_MAX_M = 2, 16


def attention_q_default(params: dict) -> dict:
    fused = _attention_q_fused_default(params)
    return {**fused, "PATH": "split"} if SPLIT_MIN_M <= params.get("M", 1) <= SPLIT_MAX_M else fused


def refuse_fused_options(cfg: dict, op: str, split_runs: str) -> None:
    """PATH "split" of a fused GEMM op (attention_q, indexer_q) runs separate kernels: the fused kernel's own options
    (SPLIT_SUM, PREFETCH, XQ) set to anything but their plain value are refused, not ignored."""
    for opt, plain in (("SPLIT_SUM", "tile"), ("PREFETCH", "next"), ("XQ", "launch")):
        if cfg.get(opt, plain) != plain:
            raise ValueError(f"{op}: config {opt} is the fused path's (PATH 'fused'); PATH 'split' runs {split_runs}")


def _attention_q_simt(cfg: dict, params: dict | None = None) -> str | None:
    """PATH "split" runs the parts (fp8_linear's GEMV at one token), else the fused kernel (its BM 1 GEMV)."""
    return _parts_simt(cfg, params or {}) if cfg.get("PATH") == "split" else KL._gemv_simt(cfg, params)


@register_impl("attention_q", "triton", backend="triton", configs=attention_q_configs,
               default_config=attention_q_default, simt=_attention_q_simt,
               kernels=lambda: [_attention_q_kernel, *_parts_kernels(*ATTENTION_Q_PARTS)()], options=frozenset({"XQ"}))
def attention_q(x, weight, weight_scale, head_dim, positions, freqs, eps, config=None):
    dev = check_device(x, weight, weight_scale, positions, freqs)
    check_dtype("x", x, torch.bfloat16)
    check_dtype("weight", weight, torch.float8_e4m3fn)
    check_dtype("weight_scale", weight_scale, torch.float8_e8m0fnu)
    if x.dim() != 2 or weight.dim() != 2 or weight.shape[1] != x.shape[1] or x.shape[1] % 128:
        raise ValueError(f"attention_q: x [M, K] and weight [N, K] with K % 128 == 0 expected, got {tuple(x.shape)} "
                         f"and {tuple(weight.shape)}")
    M, K = x.shape
    N = weight.shape[0]
    if head_dim <= 0 or N % head_dim or head_dim % 128:
        raise ValueError(f"attention_q: head_dim {head_dim} must be a multiple of 128 dividing N={N}")
    check_shape("weight_scale", weight_scale, (triton.cdiv(N, 128), K // 128))
    HL = N // head_dim
    out = torch.empty((M, HL, head_dim), dtype=torch.bfloat16, device=dev)
    r = check_head_rms_norm_rope(out, positions, freqs)
    _check_kernel_args(out, positions, freqs)
    key = {"M": M, "N": N, "K": K}
    cfg = config or lookup("attention_q", key, attention_q_default(key))
    path = cfg.get("PATH", "fused")
    if path not in ATTENTION_Q_PATHS:
        raise ValueError(f"attention_q: PATH={path!r} must be one of {', '.join(ATTENTION_Q_PATHS)}")
    if path == "split":     # the tile keys are the fused kernel's (a split entry carries the default's, unused)
        refuse_fused_options(cfg, "attention_q", "fp8_linear at its own config, then head_rms_norm_rope")
        return _attention_q_split(x, weight, weight_scale, head_dim, positions, freqs, eps)
    KL._check_cfg(cfg)
    if M == 0:
        return out
    xin, sx, quant_in_gemm = _gemm_activation(x, M, out, cfg, "attention_q")
    split, nb = _gemm_split(cfg, K, quant_in_gemm, "attention_q")
    bm, bn = cfg["BM"], cfg["BN"]
    grid = (N // bn, split, triton.cdiv(M, bm))
    part = out if split == 1 else torch.empty((split, M, N), dtype=torch.float32, device=dev)
    tickets = KL.split_tickets(dev, grid[0] * grid[2] + grid[2] * HL)
    _attention_q_kernel[grid](
        xin, sx, weight.contiguous(), weight_scale.contiguous().view(torch.uint8), out, part, tickets,
        positions.contiguous(), freqs.contiguous(), M, N, K, xin.stride(0), HL, head_dim, r // 2,
        _round_to_bf16(eps), KB_SPLIT=K // 128 // split, BM=bm, BN=bn, SPLIT=split, RB=min(cfg.get("RB", 1), bm),
        BLOCK_D=triton.next_power_of_2(head_dim), BLOCK_R2=triton.next_power_of_2(r // 2), QUANT=quant_in_gemm,
        HW_CVT=not INTERPRET, RNE_FIX=INTERPRET, NB=nb, HEAD_SUM=KL.head_sum_option(cfg, "attention_q"),
        STAGED=KL.prefetch_staged(cfg, "attention_q"), PROMOTE=fp8_promote(), num_warps=cfg["num_warps"],
        num_stages=cfg["num_stages"], **pdl_args(dev, M, weight))
    return out


# the same ops from the separate kernels (the launches the fused kernels replace): side-by-side timing in bench and
# decode-bench (--use attention_front=triton_parts --use attention_q=triton_parts)
def _parts_kernels(*names):
    from kernelbench.kernels import kv, norm, quant, rope
    mods = (KL, kv, norm, quant, rope)
    return lambda: [next(getattr(m, n) for m in mods if hasattr(m, n)) for n in names]


def _parts_simt(cfg: dict, params: dict) -> str | None:
    return ("M = 1: the composed fp8_linear parts run its BM = 1 FMA GEMV (kernels/linear.py, fp8_v2_default), "
            "SIMT by design" if params.get("M") == 1 else None)


@register_impl("attention_front", "triton_parts", backend="triton", configs=lambda p: [{}], default_config=lambda p: {},
               kernels=_parts_kernels("_fp8_quant_kernel", "_fp8_linear_v2_kernel", "_fp8_linear_kernel",
                                      "_rms_norm_kernel", "_kv_write_kernel"),
               simt=_parts_simt)
def attention_front_parts(x, wq_a, wq_a_scale, q_norm, wkv, wkv_scale, kv_norm, eps, positions, seq_ids, freqs,
                          window_cache, config=None):
    from kernelbench.kernels.kv import kv_write
    from kernelbench.kernels.norm import rms_norm
    qr = rms_norm(KL.fp8_linear(x, wq_a, wq_a_scale), q_norm, eps)
    return qr, kv_write(KL.fp8_linear(x, wkv, wkv_scale), kv_norm, eps, positions, seq_ids, freqs, window_cache)


@register_impl("attention_q", "triton_parts", backend="triton", configs=lambda p: [{}], default_config=lambda p: {},
               kernels=_parts_kernels(*ATTENTION_Q_PARTS),
               simt=_parts_simt)
def attention_q_parts(x, weight, weight_scale, head_dim, positions, freqs, eps, config=None):
    return _attention_q_split(x, weight, weight_scale, head_dim, positions, freqs, eps)


def _attention_q_split(x, weight, weight_scale, head_dim, positions, freqs, eps):
    """fp8_linear (its own lookup), then head_rms_norm_rope: attention_q's PATH "split" and `triton_parts`."""
    from kernelbench.kernels.rope import head_rms_norm_rope
    y = KL.fp8_linear(x, weight, weight_scale)
    return head_rms_norm_rope(y.view(x.shape[0], -1, head_dim), positions, freqs, eps)
