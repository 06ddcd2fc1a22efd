"""The lightning indexer's selection (SPEC 3.4): scores over each sequence's ACTUAL compressed keys
on tensor cores, then an exact top-k by radix select. Nothing is sized by the cache capacity.

Legend: T tokens, B sequences, Hi indexer heads (<= 64), Di = 128, Ncap key-cache capacity,
S4 = (p+1)//ratio the token's actual number of keys, K top-k, KP = next power of two >= K,
P programs per token in the score launch, BS keys per block.

Impl "triton_fused" is ONE launch, `_index_fused` grid (T, P): the token's first min(P, ceil(S4/BS)) programs
(at least one) compute step 1's scores, store them and take a ticket from the token's counter (the split-K
tickets of kernels/linear.py, re-armed by the kernel); the last to arrive runs step 2's FAST top-k over the
row (loads bypassing L1). The head weights are w * w_scale rounded to bf16 in the kernel (the decoder's
bf16 `weights_proj(x) * scale`, no separate launch; all impls do this). Not faster than the two launches on
the H200 (docs/perf/attention.md): impl "triton" is the two launches below.
Launches of impl "triton" (graph-capturable: no host reads of device data; every bound is read on the device):
  1. `_index_scores` grid (T, P): P depends on T and the SM count only. Program (t, j) walks blocks
     j, j+P, ... below ceil(S4/BS): keys [BS, 128] bf16 x qi^T [128, Hi] on tensor cores, relu,
     times w, summed over heads -> scores[t, :S4] (bf16 values held in fp32). Rounded to bf16 where
     the reference (DeepSeek's torch arithmetic) rounds: each head's dot, each relu'd product with
     the bf16 weight, the fp32 sum over heads. Work and bytes are S4 * 256 per token.
  2. `_index_topk` grid (T,) (or, with SEGMENTS "auto" (the default) on a cache whose rows outgrow the held select, or
     SEGMENTS > 1, `_index_topk_split` grid (T, SEG): a long row's top-k over up to SEG programs, each selecting
     its segment's top-k, the last to arrive merging the candidates that can still be in the row's top-k; a
     short row is one program's, as `_index_topk`): the K-th largest score on order-preserving keys (the
     scores are bf16 values, so only the high 16 bits of the fp32 key vary): radix select (2 passes of 8
     bits with tl.histogram over the S4 scores), or with config ROW_REGS (`held_plan`; by default "auto":
     held-only in the one-program top-k when the cache holds no row past 32768 scores, in a power of two and a
     tail block for a cache just past one: `held_block`) a row (segment) of up to ROW_REGS scores read once into
     registers and its K-th key's high half found by a binary search on block-wide counts (`_select_held`, in the
     smallest of ROW_LEVELS block sizes that holds it; its first count SEARCH_WINDOW halves below the row's
     largest); then a compaction (from the held registers, STAGE_HELD, or a pass over the row) that keeps every
     key above the threshold and the lowest-index keys equal to it, then one
     sort of the KP survivors packed as (key << 32 | ~index): best first, ties toward the lower index, as the
     reference; the scores are decoded from the sorted keys. A row with S4 <= K skips the select (every
     key is kept): its scores are packed and sorted directly. -1 / -inf pad rows with fewer than K keys.
     Impl "triton_v1" is the first version (FAST=False: 4 passes over 32-bit keys, always the select,
     the scores gathered from the row), kept to measure against.
The score scratch is [T, Ncap] fp32 from torch.empty (no fill, never read past S4): only its
allocation, not any work, is sized by the capacity.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernelbench.kernels.attention import sm_count  # noqa: F401  (also applies the interpreter loop fix)
from kernelbench.kernels.common import (INTERPRET, check_device, check_dtype, check_shape, dot_operand, fp8_promote,
                                       hadamard128, hadamard128_rows, pdl_args, pdl_enter, relu_scale_bf16, sincos,
                                       to_bf16, token_emits)
from kernelbench.kernels.kv import _attention_indices_kernel, attention_indices, window_slots
from kernelbench.kernels.linear import fp8_tile_head_ticket, gives_back, split_tickets
from kernelbench.kernels.quant import fp4_quant_pairs, fp4_simulate_rows
from kernelbench.reference.indexer import (KEY_GROUP, check_fp4_keys, check_indexer_topk, check_w_scale,
                                           fp4_key_rows, unpack_fp4_keys)
from kernelbench.reference.kv import check_window
from kernelbench.registry import register_impl
from kernelbench.tuned_configs import lookup

DI = 128


# config space ----------------------------------------------------------------------------------
def indexer_configs(params: dict) -> list[dict]:
    """Score launch: keys per block, warps, stages, programs (x SMs); top-k launch: scores per scan
    step and its warps (one program per token walks S4 three times: wide steps amortize L2 latency).
    SEGMENTS (default "auto", `topk_segments`; 1 = one program per token; > 1 = at most that many), SEG_MIN
    (fewest scores per segment, default `seg_min_default`) and ROW_REGS (`row_regs`) are not tuned (the lookup key
    has no context, and they matter only for long rows): the space holds the default ("auto": `held_plan`), one
    config that splits short rows, one with the held select beside the radix passes (ROW_REGS 16384) and one with
    the radix passes only (ROW_REGS 0)."""
    space = [{"BLOCK_S": bs, "num_warps": w, "num_stages": st, "waves": wv, "SCAN": sc, "TOPK_WARPS": tw,
              "SEGMENTS": "auto", "ROW_REGS": ROW_REGS_DEFAULT}
             for bs in (64, 128) for w in (4, 8) for st in (3,) for wv in (2, 4)
             for sc, tw in ((2048, 8), (4096, 16), (8192, 16))]
    # the split top-k's merge on any row of 8+ scores: `kernelbench verify` runs every value a space offers, so
    # this config makes it check the merge at small shapes (the default splits only rows of 8192+ scores); and the
    # held select beside the radix passes (ROW_REGS 16384) and the radix select alone (0): verify runs both kernels
    # at every shape, where the default ("auto") compiles the held select only for caches of <= 32768 entries; the
    # held select staging by a pass over the row (STAGE_HELD false) beside the default's stage from registers; and
    # the split top-k with held segments and a held merge (SPLIT_HELD, opt-in); the score launch's head terms on
    # the fp32 path (BF16X2 false; the same code as the default under the interpreter); and their sum on the tensor
    # cores (HEAD_MMA, opt-in; at 4 warps its 128-key blocks spill on sm_120, at 8 they fit both targets)
    return space + _path_configs(indexer_default(params))


def _path_configs(base: dict) -> list[dict]:
    """The configs beside the block grid that make verify run each top-k and score path (indexer_configs) from a
    default `base`."""
    return [{**base, "SEGMENTS": 4, "SEG_MIN": 4}, {**base, "SEGMENTS": 4, "SEG_MIN": 4, "SPLIT_HELD": True},
            {**base, "ROW_REGS": 16384}, {**base, "ROW_REGS": 0}, {**base, "STAGE_HELD": False},
            {**base, "BF16X2": False}, {**base, "HEAD_MMA": True}, {**base, "HEAD_MMA": True, "num_warps": 8}]


def indexer_default(params: dict) -> dict:
    return {"BLOCK_S": 128, "num_warps": 4, "num_stages": 3, "waves": 4, "SCAN": 4096, "TOPK_WARPS": 16,
            "SEGMENTS": "auto", "ROW_REGS": ROW_REGS_DEFAULT}


@triton.jit
def _score_tile(keys, qt, w, out, smask, DOT_UPCAST: tl.constexpr, RNE_FIX: tl.constexpr, ASM: tl.constexpr,
                HEAD_MMA: tl.constexpr):
    """One block of keys (BS, 128) -> its scores at `out` (where smask; None: every row). The head sum of the bf16
    terms in fp32: by the CUDA cores (tl.sum: on sm_90 two instructions a pair to unpack them, an FADD each and the
    shuffles), or with HEAD_MMA (config, opt-in) on the tensor cores, terms (BS, BHi) @ ones (BHi, 16), the terms
    straight from registers as the MMA's A operand (sm_90 static SASS of the loop at 64K, T = 64: 367 -> 265
    instructions; sm_120 625 -> 467), yet slower in the H200's 64K step (session 32: the loop is latency-bound and
    the second product adds a dependent round trip a block). Its fp32 sum may differ from the CUDA cores' order in
    the last fp32 bit, which the bf16 rounding after it almost always absorbs (the indexer's tolerance: one bf16 ulp
    where it does not)."""
    sc = tl.dot(dot_operand(keys, DOT_UPCAST), qt)                      # (BS, BHi) fp32
    if HEAD_MMA:
        terms = relu_scale_bf16(sc, w[None, :], ASM, RNE_FIX, True)     # bf16 (BS, BHi)
        ones = tl.full((terms.shape[1], 16), 1.0, tl.float32).to(tl.bfloat16)   # 16 columns: the narrowest dot
        tot = tl.max(tl.dot(dot_operand(terms, DOT_UPCAST), dot_operand(ones, DOT_UPCAST)), axis=1)  # equal columns
    else:
        terms = relu_scale_bf16(sc, w[None, :], ASM, RNE_FIX)           # bf16(relu(the bf16 matmul output) * w)
        tot = tl.sum(terms, axis=1)
    tot = to_bf16(tot, RNE_FIX).to(tl.float32)
    tot = tl.where(tot == 0.0, 0.0, tot)                                # -0.0 -> +0.0: ties as the reference
    tl.store(out, tot, mask=smask)


@triton.jit
def _fp4_key_rows(kc_seq, ke_seq, rows, valid, s_kn, s_en, DI: tl.constexpr, GROUP: tl.constexpr,
                  MASKED: tl.constexpr):
    """Key rows (BS, DI) bf16 from the FP4 form (`pack_fp4_keys`): each byte two e2m1 codes (the low nibble the even
    dim) times 2^(e - 127) of their GROUP-dim group's exponent byte e. A code's bits moved into an fp16 (exponent
    and mantissa bits 2-0 to bits 11-9, the sign to 15) are its value times 2^-14 (0.5 the fp16 subnormal 2^-15),
    two integer ops a value; made fp32 and multiplied by 2^(e - 113) (NaN for e 255, the never-read rows), exact,
    then bf16: exactly the bf16 keys they were packed from (e <= KEY_EXP_MAX, and no subnormal value: in the
    interpreter the subnormal 2^-127 came out 0, so `pack_fp4_keys` refuses them). MASKED: rows where `valid` only
    (others 0)."""
    c = tl.arange(0, DI // 2)
    g = tl.arange(0, DI // GROUP)
    at_c = kc_seq + rows[:, None] * s_kn + c[None, :]
    at_e = ke_seq + rows[:, None] * s_en + g[None, :]
    if MASKED:
        byte = tl.load(at_c, mask=valid[:, None], other=0)
        e = tl.load(at_e, mask=valid[:, None], other=127)
    else:
        byte = tl.load(at_c)
        e = tl.load(at_e)
    byte = byte.to(tl.int32)
    e = e.to(tl.int32)
    scale = tl.where(e == 255, float("nan"), ((e + 14) << 23).to(tl.float32, bitcast=True))     # (BS, G)
    bs: tl.constexpr = rows.shape[0]
    scale = tl.reshape(tl.broadcast_to(scale[:, :, None], [bs, DI // GROUP, GROUP // 2]), [bs, DI // 2])
    lo = (((byte & 7) << 9) | ((byte & 8) << 12)).to(tl.int16).to(tl.float16, bitcast=True)
    hi = (((byte & 0x70) << 5) | ((byte & 0x80) << 8)).to(tl.int16).to(tl.float16, bitcast=True)
    lo = (lo.to(tl.float32) * scale).to(tl.bfloat16)
    hi = (hi.to(tl.float32) * scale).to(tl.bfloat16)
    return tl.reshape(tl.join(lo, hi), [bs, DI])


@triton.jit
def _score_blocks(qi_ptr, w_ptr, k_ptr, seq_ptr, sc_ptr, t, j, n, HI, P, w_scale, s_qt, s_qh, s_wt, s_kb, s_kn,
                  s_st, DI: tl.constexpr, BLOCK_HI: tl.constexpr, BLOCK_S: tl.constexpr, DOT_UPCAST: tl.constexpr,
                  RNE_FIX: tl.constexpr, ASM: tl.constexpr, HEAD_MMA: tl.constexpr, KEY_FP4: tl.constexpr = False,
                  ke_ptr=None, s_eb=0, s_en=0, GROUP: tl.constexpr = 32):
    """Scores of token t's key blocks j, j+P, ... below n (the caller checks j * BLOCK_S < n). The head weights
    are w * w_scale rounded to bf16 (exact for w_scale 1). ASM: the head terms two at a time in bf16x2 PTX
    (`relu_scale_bf16`; compiled runs only). The blocks that lie wholly below n load and store without masks,
    through pointers that step by P blocks; the one block that n cuts, if any, comes after them, masked.
    KEY_FP4 (impl triton_fp4keys): k_ptr the FP4 key cache's codes, ke_ptr its exponent bytes (`_fp4_key_rows`)."""
    offs_h = tl.arange(0, BLOCK_HI)
    offs_d = tl.arange(0, DI)
    rows = tl.arange(0, BLOCK_S)
    hmask = offs_h < HI
    qi = tl.load(qi_ptr + t * s_qt + offs_h[:, None] * s_qh + offs_d[None, :], mask=hmask[:, None], other=0.0)
    qt = dot_operand(tl.trans(qi), DOT_UPCAST)                          # (128, BHi)
    w = tl.load(w_ptr + t * s_wt + offs_h, mask=hmask, other=0.0).to(tl.float32)
    w = to_bf16(w * w_scale, RNE_FIX)                                  # torch's bf16 * scalar (fp32 product)
    s0 = j * BLOCK_S
    step = P * BLOCK_S
    seq = tl.load(seq_ptr + t).to(tl.int64)
    k_seq = k_ptr + seq * s_kb
    ke_seq = ke_ptr + seq * s_eb if KEY_FP4 else ke_ptr
    keys_at = k_seq + rows[:, None].to(tl.int64) * s_kn + offs_d[None, :]  # block 0's keys; block b's: + b * s_kn
    out_at = sc_ptr + t * s_st + rows
    full = tl.maximum(n - s0 - BLOCK_S + step, 0) // step               # blocks s0 + i * step + BS <= n
    for i in range(0, full):
        b = s0 + i * step
        if KEY_FP4:
            keys = _fp4_key_rows(k_seq, ke_seq, b.to(tl.int64) + rows, None, s_kn, s_en, DI, GROUP, False)
        else:
            keys = tl.load(keys_at + b.to(tl.int64) * s_kn)
        _score_tile(keys, qt, w, out_at + b, None, DOT_UPCAST, RNE_FIX, ASM, HEAD_MMA)
    b = s0 + full * step
    if b < n:
        smask = b + rows < n
        if KEY_FP4:
            keys = _fp4_key_rows(k_seq, ke_seq, b.to(tl.int64) + rows, smask, s_kn, s_en, DI, GROUP, True)
        else:
            keys = tl.load(keys_at + b.to(tl.int64) * s_kn, mask=smask[:, None], other=0.0)
        _score_tile(keys, qt, w, out_at + b, smask, DOT_UPCAST, RNE_FIX, ASM, HEAD_MMA)


@triton.jit
def _index_scores(qi_ptr, w_ptr, k_ptr, seq_ptr, pos_ptr, sc_ptr,   # qi (T, Hi, 128) bf16; w (T, Hi) bf16
                  HI, RATIO, P, w_scale, s_qt, s_qh, s_wt, s_kb, s_kn, s_st,  # k (B, Ncap, 128) bf16; sc (T, Ncap) fp32
                  DI: tl.constexpr, BLOCK_HI: tl.constexpr, BLOCK_S: tl.constexpr, DOT_UPCAST: tl.constexpr,
                  RNE_FIX: tl.constexpr, ASM: tl.constexpr = False, HEAD_MMA: tl.constexpr = False,
                  KEY_FP4: tl.constexpr = False, ke_ptr=None, s_eb=0, s_en=0, GROUP: tl.constexpr = 32):
    # KEY_FP4 (impl triton_fp4keys): k the FP4 key cache's codes (B, Ncap, 64) uint8, ke its exponents (B, Ncap, 4)
    t = tl.program_id(0)
    j = tl.program_id(1)
    n = ((tl.load(pos_ptr + t) + 1) // RATIO).to(tl.int32)              # the ACTUAL number of keys (32-bit tests)
    if j * BLOCK_S < n:                                                 # idle programs read nothing
        _score_blocks(qi_ptr, w_ptr, k_ptr, seq_ptr, sc_ptr, t, j, n, HI, P, w_scale, s_qt, s_qh, s_wt, s_kb, s_kn, s_st,
                      DI, BLOCK_HI, BLOCK_S, DOT_UPCAST, RNE_FIX, ASM, HEAD_MMA, KEY_FP4, ke_ptr, s_eb, s_en, GROUP)


@triton.jit
def _order_key(s):
    """fp32 -> uint32 whose unsigned order is the float order."""
    u = s.to(tl.uint32, bitcast=True)
    sign = tl.full([], 1, tl.uint32) << 31
    return tl.where((u & sign) != 0, u ^ (sign | (sign - 1)), u | sign)


@triton.jit
def _flip_index(i):
    """i -> 0xFFFFFFFF - i as uint32 (larger packed key = lower index). `~` trips the interpreter."""
    sign = tl.full([], 1, tl.uint32) << 31
    return i.to(tl.uint32) ^ (sign | (sign - 1))


@triton.jit
def _load_keys(src, offs, m, base, PACKED: tl.constexpr, CACHE: tl.constexpr):
    """-> (order key uint32, packed uint64 = key << 32 | ~index) of the elements at offs.
    PACKED: src holds packed candidates (int64) already; else fp32 scores whose index is base + offs.
    CACHE: the loads' cache modifier (".cg" where other programs of the same launch wrote src)."""
    if PACKED:
        packed = tl.load(src + offs, mask=m, other=0, cache_modifier=CACHE).to(tl.uint64, bitcast=True)
        key = (packed >> 32).to(tl.uint32)
    else:
        key = _order_key(tl.load(src + offs, mask=m, other=0.0, cache_modifier=CACHE))
        packed = (key.to(tl.uint64) << 32) | _flip_index(base + offs).to(tl.uint64)
    return key, packed


@triton.jit
def _radix_pass(src, n, prefix, k_rem, SHIFT: tl.constexpr, HIMASK: tl.constexpr, SCAN: tl.constexpr,
                PACKED: tl.constexpr, CACHE: tl.constexpr):
    """Histogram of the 8-bit digit at SHIFT over keys whose higher digits equal `prefix`; pick the
    digit holding the k_rem-th largest. Returns the extended prefix and the rank left inside it."""
    hist = tl.zeros([256], tl.int32)
    for s0 in range(0, n, SCAN):
        offs = s0 + tl.arange(0, SCAN)
        m = offs < n
        key, _ = _load_keys(src, offs, m, 0, PACKED, CACHE)
        match = m & ((key & HIMASK) == (prefix & HIMASK))
        digit = ((key >> SHIFT) & 0xFF).to(tl.int32)
        hist += tl.histogram(digit, 256, mask=match)
    bins = tl.arange(0, 256)
    ge = tl.sum(hist, axis=0) - tl.cumsum(hist, axis=0) + hist          # keys with digit >= b
    b = tl.max(tl.where(ge >= k_rem, bins, -1), axis=0)
    b = tl.maximum(b, 0)
    above = tl.sum(tl.where(bins > b, hist, 0), axis=0)
    return prefix | (b.to(tl.uint32) << SHIFT), k_rem - above


@triton.jit
def _kth_key(src, n, k, SCAN: tl.constexpr, PACKED: tl.constexpr, KEY16: tl.constexpr, CACHE: tl.constexpr):
    """Radix select: the k-th largest of the n keys at src (KEY16: its high half, the low half zero) and how many
    keys equal to it are among the k largest."""
    prefix = tl.zeros([], tl.uint32)
    k_rem = k
    prefix, k_rem = _radix_pass(src, n, prefix, k_rem, 24, 0x00000000, SCAN, PACKED, CACHE)
    prefix, k_rem = _radix_pass(src, n, prefix, k_rem, 16, 0xFF000000, SCAN, PACKED, CACHE)
    if not KEY16:
        prefix, k_rem = _radix_pass(src, n, prefix, k_rem, 8, 0xFFFF0000, SCAN, PACKED, CACHE)
        prefix, k_rem = _radix_pass(src, n, prefix, k_rem, 0, 0xFFFFFF00, SCAN, PACKED, CACHE)
    return prefix, k_rem


@triton.jit
def _select(src, n, k_eff, stage, base, SCAN: tl.constexpr, PACKED: tl.constexpr, KEY16: tl.constexpr,
            CACHE: tl.constexpr):
    """Write the k_eff largest of the n keys at src into stage[0:k_eff] as packed values (unsorted):
    radix select of the k_eff-th key, then every key above it and the lowest-position keys equal to it.
    KEY16: the scores are bf16 values, so the low 16 bits of an order key follow from its high 16 (zeros
    for a positive score, ones for a negative one): two 8-bit passes over the high half find the threshold
    and the comparisons use the high half only (same order, same ties).
    Equal keys appear in index order at src (scores, or candidates laid out segment by segment), so
    'lowest position' is 'lowest index'."""
    prefix, k_rem = _kth_key(src, n, k_eff, SCAN, PACKED, KEY16, CACHE)
    _stage_top(src, n, k_eff, prefix, k_rem, stage, base, SCAN, PACKED, 16 if KEY16 else 0, CACHE)
    return prefix                                                       # the k_eff-th key (KEY16: its high half)


@triton.jit
def _stage_top(src, n, k_eff, prefix, k_rem, stage, base, SCAN: tl.constexpr, PACKED: tl.constexpr,
               shift: tl.constexpr, CACHE: tl.constexpr):
    """Stage the k_eff largest keys at src given the k_eff-th (prefix, compared above bit `shift`) and how many keys
    equal to it are among them (k_rem): those above it, then the lowest-position equal ones, in one pass. Each step
    ranks its keys with one block-wide scan: the above / equal flags packed in one int32 (above << 16 | equal; a step
    holds at most SCAN <= 16384 of each, so neither field carries into the other nor the sign), and its totals come
    from one sum (two scans and two sums a step before session 29: the stage was ~47% of the one-program top-k's
    instructions at 64K tokens, H200 Nsight Compute, data/h200-2026-12-05-session29/call3)."""
    tl.static_assert(SCAN <= 16384, "_stage_top packs two per-step counts of up to SCAN in 16 bits each")
    c_gt = k_eff - k_rem                                                # keys strictly above the threshold
    n_gt = 0
    n_eq = 0
    for s0 in range(0, n, SCAN):
        offs = s0 + tl.arange(0, SCAN)
        m = offs < n
        key, packed = _load_keys(src, offs, m, base, PACKED, CACHE)
        gt = m & ((key >> shift) > (prefix >> shift))
        eq = m & ((key >> shift) == (prefix >> shift))
        flags = (gt.to(tl.int32) << 16) | eq.to(tl.int32)
        ranks = tl.cumsum(flags, axis=0)                                # inclusive: (above, equal) up to here
        r_gt = n_gt + (ranks >> 16) - 1
        r_eq = n_eq + (ranks & 0xFFFF) - 1
        take = gt | (eq & (r_eq < k_rem))
        dst = tl.where(gt, r_gt, c_gt + r_eq)
        tl.store(stage + dst, packed.to(tl.int64, bitcast=True), mask=take)
        total = tl.sum(flags, axis=0)
        n_gt += total >> 16
        n_eq += total & 0xFFFF
    tl.debug_barrier()                                                  # staged writes visible to the CTA


@triton.jit
def _held_half(src, offs, n, base, CACHE: tl.constexpr, PACKED: tl.constexpr = False):
    """The high halves of the order keys at offs < n (bf16 scores: the low half follows from the sign; PACKED:
    packed candidates, _load_keys), 0 elsewhere: below every finite score's (>= 0x7F)."""
    m = offs < n
    key, _ = _load_keys(src, offs, m, base, PACKED, CACHE)
    return tl.where(m, key >> 16, 0).to(tl.int32)


@triton.jit
def _half_key(half):
    """A bf16 score's whole order key from its high half: the low half is 0xFFFF for a negative score, else 0."""
    half = half.to(tl.uint32)
    return (half << 16) | tl.where(half < 0x8000, 0xFFFF, 0).to(tl.uint32)


@triton.jit
def _count_from(half, half_b, half_t, v, PAIR: tl.constexpr, TAIL: tl.constexpr):
    """#(held halves >= v): the main block (PAIR: held as two halves, half and half_b, summed per thread before the
    one block-wide sum), and the tail block when TAIL > 0."""
    hits = (half >= v).to(tl.int32)
    if PAIR:
        hits += (half_b >= v).to(tl.int32)
    c = tl.sum(hits, axis=0)
    if TAIL > 0:
        c += tl.sum((half_t >= v).to(tl.int32), axis=0)
    return c


@triton.jit
def _stage_block(half, offs, thr, c_gt, k_rem, n_gt, n_eq, stage, base):
    """_stage_top's step over held halves (offs: their positions in the row; padding holds 0, below thr >= 1):
    the keys above thr at their rank among those above, the first k_rem keys equal to it after the c_gt above it,
    from a scan of the packed flags (above << 16 | equal: fewer than K keys are above thr and a block holds at most
    32768 equal ones, so neither field carries) in rows of 32: a scan along each row and one over the row totals
    (sm_90 SASS: ~630 fewer instructions than one scan over the flat block of 16384). The packed
    value is rebuilt from the half (a bf16 score's order key has low half 0xFFFF when negative, else 0) and the
    index: no second read of the row. n_gt / n_eq: the above / equal keys of earlier blocks. -> the totals with
    this block's."""
    tl.static_assert(half.shape[0] % 32 == 0, "_stage_block scans held blocks in rows of 32")
    R: tl.constexpr = half.shape[0] // 32
    gt = half > thr
    eq = half == thr
    flags = tl.reshape((gt.to(tl.int32) << 16) | eq.to(tl.int32), (R, 32))
    row_tot = tl.sum(flags, axis=1)
    ranks = (tl.cumsum(row_tot, axis=0) - row_tot)[:, None] + tl.cumsum(flags, axis=1)
    ranks = tl.reshape(ranks, (half.shape[0],))
    r_eq = n_eq + (ranks & 0xFFFF) - 1
    take = gt | (eq & (r_eq < k_rem))
    dst = tl.where(gt, n_gt + (ranks >> 16) - 1, c_gt + r_eq)
    packed = (_half_key(half).to(tl.uint64) << 32) | _flip_index(base + offs).to(tl.uint64)
    tl.store(stage + dst, packed.to(tl.int64, bitcast=True), mask=take)
    total = tl.sum(row_tot, axis=0)
    return n_gt + (total >> 16), n_eq + (total & 0xFFFF)


@triton.jit
def _held_search(half, half_b, half_t, k_eff, PAIR: tl.constexpr, TAIL: tl.constexpr, WINDOW: tl.constexpr):
    """The k_eff-th largest of the held halves (the main block, with PAIR as half and half_b (unread otherwise), and
    the tail block half_t when TAIL > 0, unread otherwise; padding holds 0, below every key's, and at least k_eff
    halves are >= 1) and how many halves are above
    it: a binary search on counts, the largest v with #(half >= v) >= k_eff, over all 65536 halves or first WINDOW
    below the largest (`_select_held`). The count at the upper bound is carried, so the last one is the count above
    the k-th."""
    lo = tl.zeros([], tl.int32)                      # #(half >= lo) >= k_eff; c_hi = #(half >= hi) < k_eff
    hi = lo + 65536
    c_hi = tl.zeros([], tl.int32)
    if WINDOW > 0:                                   # the WINDOW halves below the largest first: one count
        if PAIR:
            top = tl.max(tl.maximum(half, half_b), axis=0)
        else:
            top = tl.max(half, axis=0)
        if TAIL > 0:
            top = tl.maximum(top, tl.max(half_t, axis=0))
        probe = tl.maximum(top + 1 - WINDOW, 1)
        c_probe = _count_from(half, half_b, half_t, probe, PAIR, TAIL)
        near = c_probe >= k_eff
        lo = tl.where(near, probe, lo)
        hi = tl.where(near, top + 1, probe)
        c_hi = tl.where(near, c_hi, c_probe)         # near: nothing is >= top + 1
    while hi - lo > 1:                               # every mid >= 1, so the padding never counts
        mid = (lo + hi) // 2
        c_mid = _count_from(half, half_b, half_t, mid, PAIR, TAIL)
        enough = c_mid >= k_eff
        lo = tl.where(enough, mid, lo)
        hi = tl.where(enough, hi, mid)
        c_hi = tl.where(enough, c_hi, c_mid)
    return lo, c_hi                                  # hi = lo + 1: c_hi counts the keys above lo


@triton.jit
def _kth_candidate(src, n, k, SCAN: tl.constexpr, NB: tl.constexpr, FAST: tl.constexpr, HELD: tl.constexpr,
                   CACHE: tl.constexpr, WINDOW: tl.constexpr):
    """_kth_key over n <= NB packed candidates at src (key << 32 | ~index; zero padding never counts): the k-th key
    (FAST: its high half) and how many keys equal to it are among the k largest. HELD (the split top-k's MERGE_HELD;
    FAST only): by the held search over the NB candidates' halves (_held_search), else the radix passes."""
    if HELD:
        tl.static_assert(FAST, "the held search takes 16-bit keys (FAST)")
        lo, c_gt = _held_search(_held_half(src, tl.arange(0, NB), n, 0, CACHE, True), 0, 0, k, False, 0, WINDOW)
        prefix = lo.to(tl.uint32) << 16
        k_rem = k - c_gt
    else:
        prefix, k_rem = _kth_key(src, n, k, SCAN, True, FAST, CACHE)
    return prefix, k_rem


@triton.jit
def _select_held(src, n, k_eff, stage, base, SCAN: tl.constexpr, ROWB: tl.constexpr, CACHE: tl.constexpr,
                 TAIL: tl.constexpr = 0, STAGE_HELD: tl.constexpr = False, WINDOW: tl.constexpr = 0):
    """_select's result for a FAST row of n <= ROWB + TAIL scores: the high halves of the row's order keys (bf16
    scores: the low half follows from the sign) are read once and stay in registers, in a block of ROWB and (TAIL >
    0) a tail block of TAIL after it (a row just past a power of two, as the decode step's 16,400-entry cache at
    64K tokens, counts over 16384 + 512 instead of 32768), and the k_eff-th key's high half is found by a binary
    search on counts (block-wide sums, no histograms, no re-reads: the largest v with #(half >= v) >= k_eff): over
    all 65536 halves (16 counts), or with WINDOW > 0 first one count at WINDOW halves below the row's largest: when
    k_eff keys are there (a top-k of a few percent of a row whose largest score is < 2^(WINDOW / 128) times the
    k-th: four binades at 512) the search takes log2(WINDOW) counts, else the rest of the range below it (the bounds
    hold either way: same result); then the stage: STAGE_HELD from the held halves (_stage_block: one scan per
    block, no second read of the row), else _stage_top's pass over the row. Same staged values in the same places
    either way."""
    tl.static_assert(ROWB <= 32768, "_stage_block packs a block's equal count in 16 bits")
    # STAGE_HELD: the block held as two halves, so the stage's scan holds half the values at once (one block of 16384
    # at 16 warps staged whole peaked past 128 registers: 84-196 bytes of spills on sm_90 / sm_120)
    PAIR: tl.constexpr = STAGE_HELD and ROWB >= 64
    if PAIR:
        offs = tl.arange(0, ROWB // 2)
        offs_b = ROWB // 2 + offs
        half = _held_half(src, offs, n, base, CACHE)
        half_b = _held_half(src, offs_b, n, base, CACHE)
    else:
        offs = tl.arange(0, ROWB)
        half = _held_half(src, offs, n, base, CACHE)
        offs_b = offs                                # unread
        half_b = half
    if TAIL > 0:
        offs_t = ROWB + tl.arange(0, TAIL)
        half_t = _held_half(src, offs_t, n, base, CACHE)
    else:                                            # no tail: never read (_count_from, the stage skip it)
        offs_t = offs
        half_t = half
    lo, c_gt = _held_search(half, half_b, half_t, k_eff, PAIR, TAIL, WINDOW)
    if STAGE_HELD:
        n_gt, n_eq = _stage_block(half, offs, lo, c_gt, k_eff - c_gt, 0, 0, stage, base)
        if PAIR:
            n_gt, n_eq = _stage_block(half_b, offs_b, lo, c_gt, k_eff - c_gt, n_gt, n_eq, stage, base)
        if TAIL > 0:
            _stage_block(half_t, offs_t, lo, c_gt, k_eff - c_gt, n_gt, n_eq, stage, base)
        tl.debug_barrier()                                              # staged writes visible to the CTA
    else:
        _stage_top(src, n, k_eff, lo.to(tl.uint32) << 16, k_eff - c_gt, stage, base, SCAN, False, 16, CACHE)
    return lo.to(tl.uint32) << 16                                       # the k_eff-th key's high half, as _select


@triton.jit
def _select_fast(src, n, k_eff, stage, base, SCAN: tl.constexpr, ROWB: tl.constexpr, CACHE: tl.constexpr,
                 ROWL: tl.constexpr = 4, RADIX: tl.constexpr = True, TAIL: tl.constexpr = 0,
                 STAGE_HELD: tl.constexpr = False, WINDOW: tl.constexpr = 0):
    """The FAST select of a row of n scores: held in registers when n <= ROWB + TAIL (config ROW_REGS; TAIL:
    `held_plan`'s tail block) in the smallest of ROWL block sizes that holds it (ROWL 4: ROWB / 8, / 4, / 2 and
    ROWB (+ TAIL); 2: ROWB / 2 and ROWB (+ TAIL); 1: ROWB (+ TAIL); config ROW_LEVELS: the count work follows the
    row, not the block: a held select of a short row in a 16384-wide block cost more than the radix passes, H200
    session 26), else _select's radix passes over 16-bit keys. RADIX False: the host guarantees n <= ROWB + TAIL
    (the key cache holds no longer row, `held_only`) and the radix passes are not compiled in. STAGE_HELD: the
    held select stages from its registers (_select_held). Same staged values either way."""
    if ROWB == 0:
        thr = _select(src, n, k_eff, stage, base, SCAN, False, True, CACHE)
    elif not RADIX:         # decided at compile time, apart from the runtime test below: no radix passes compiled in
        thr = _select_levels(src, n, k_eff, stage, base, SCAN, ROWB, CACHE, ROWL, TAIL, STAGE_HELD, WINDOW)
    elif n <= ROWB + TAIL:
        thr = _select_levels(src, n, k_eff, stage, base, SCAN, ROWB, CACHE, ROWL, TAIL, STAGE_HELD, WINDOW)
    else:
        thr = _select(src, n, k_eff, stage, base, SCAN, False, True, CACHE)
    return thr


@triton.jit
def _select_levels(src, n, k_eff, stage, base, SCAN: tl.constexpr, ROWB: tl.constexpr, CACHE: tl.constexpr,
                   ROWL: tl.constexpr, TAIL: tl.constexpr = 0, SH: tl.constexpr = False, WIN: tl.constexpr = 0):
    """_select_held of a row of n <= ROWB + TAIL scores in the smallest of ROWL (1, 2 or 4) blocks ROWB (+ TAIL),
    ROWB / 2, ... (SH: STAGE_HELD)."""
    if ROWL == 1:
        thr = _select_held(src, n, k_eff, stage, base, SCAN, ROWB, CACHE, TAIL, SH, WIN)
    elif ROWL == 2:
        if n <= ROWB // 2:
            thr = _select_held(src, n, k_eff, stage, base, SCAN, ROWB // 2, CACHE, 0, SH, WIN)
        else:
            thr = _select_held(src, n, k_eff, stage, base, SCAN, ROWB, CACHE, TAIL, SH, WIN)
    else:
        if n <= ROWB // 8:
            thr = _select_held(src, n, k_eff, stage, base, SCAN, ROWB // 8, CACHE, 0, SH, WIN)
        elif n <= ROWB // 4:
            thr = _select_held(src, n, k_eff, stage, base, SCAN, ROWB // 4, CACHE, 0, SH, WIN)
        elif n <= ROWB // 2:
            thr = _select_held(src, n, k_eff, stage, base, SCAN, ROWB // 2, CACHE, 0, SH, WIN)
        else:
            thr = _select_held(src, n, k_eff, stage, base, SCAN, ROWB, CACHE, TAIL, SH, WIN)
    return thr


@triton.jit
def _key_value(key):
    """Inverse of _order_key: uint32 order key -> the fp32 score."""
    sign = tl.full([], 1, tl.uint32) << 31
    u = tl.where((key & sign) != 0, key ^ sign, key ^ (sign | (sign - 1)))
    return u.to(tl.float32, bitcast=True)


@triton.jit
def _emit_sorted(stage, k_eff, sc_row, idx_out, val_out, TOPK, direct, KP: tl.constexpr, FAST: tl.constexpr,
                 CACHE: tl.constexpr, OFF: tl.constexpr, SORT32: tl.constexpr = False):
    """Sort the k_eff staged packed values (best first, ties to the lower index) and write the row, each index + OFF
    (-1 stays -1: csa_indices writes W + entry into the attention row).
    FAST: `direct` (k_eff is the whole row: the caller skipped the select) packs the row's scores here
    instead of reading `stage`, and the scores come out of the packed keys (no gather of the row).
    SORT32 (FAST, a row of < 65536 scores: the held-only select): the sort runs on 32-bit values, the key's high
    half << 16 | 0xFFFF - index (a bf16 score's key follows from its high half): the same order as the 64-bit
    packed values, in half the sorting network's registers and compares."""
    offs_k = tl.arange(0, KP)
    valid = offs_k < k_eff
    if FAST:
        staged = tl.load(stage + offs_k, mask=valid & (direct == 0), other=0).to(tl.uint64, bitcast=True)
        _, row = _load_keys(sc_row, offs_k, valid & (direct != 0), 0, False, CACHE)
        packed = tl.where(direct != 0, row, staged)
        packed = tl.where(valid, packed, 0)
    else:
        packed = tl.load(stage + offs_k, mask=valid, other=0).to(tl.uint64, bitcast=True)
    if SORT32:
        tl.static_assert(FAST, "SORT32 rebuilds keys from their high halves (bf16 scores: FAST)")
        idx = _flip_index(packed.to(tl.uint32)).to(tl.int32)
        short = ((packed >> 48).to(tl.uint32) << 16) | (0xFFFF - idx).to(tl.uint32)
        short = tl.sort(tl.where(valid, short, 0), descending=True)
        idx = (0xFFFF - (short & 0xFFFF)).to(tl.int32)
        val = tl.where(valid, _key_value(_half_key(short >> 16)), float("-inf"))
    else:
        packed = tl.sort(packed, descending=True)
        idx = _flip_index(packed.to(tl.uint32)).to(tl.int32)
        if FAST:                                                        # the score is in the packed key
            val = tl.where(valid, _key_value((packed >> 32).to(tl.uint32)), float("-inf"))
        else:
            val = tl.load(sc_row + tl.where(valid, idx, 0), mask=valid, other=float("-inf"))
    omask = offs_k < TOPK
    tl.store(idx_out + offs_k, tl.where(valid, idx + OFF, -1), mask=omask)
    tl.store(val_out + offs_k, val, mask=omask)


@triton.jit
def _topk_row(sc_row, n, stage, idx_out, val_out, TOPK, KP: tl.constexpr, SCAN: tl.constexpr, FAST: tl.constexpr,
              OFF: tl.constexpr, ROWB: tl.constexpr = 0, ROWL: tl.constexpr = 4, RADIX: tl.constexpr = True,
              TAIL: tl.constexpr = 0, STAGE_HELD: tl.constexpr = False, WINDOW: tl.constexpr = 0):
    """One program selects, sorts and writes a token's row of n scores. FAST (impl "triton"): 16-bit select
    keys, and no select at all when the row has <= TOPK scores; not FAST: the first version (triton_v1)."""
    k_eff = tl.minimum(n, TOPK)
    if FAST:
        if n > TOPK:
            _select_fast(sc_row, n, k_eff, stage, 0, SCAN, ROWB, "", ROWL, RADIX, TAIL, STAGE_HELD, WINDOW)
    else:
        _select(sc_row, n, k_eff, stage, 0, SCAN, False, False, "")
    _emit_sorted(stage, k_eff, sc_row, idx_out, val_out, TOPK, n <= TOPK, KP, FAST, "", OFF,
                 FAST and ROWB > 0 and not RADIX)


@triton.jit
def _row_head(idx_ptr, len_ptr, t, p, n, TOPK, s_ot, ROW_W: tl.constexpr, WP: tl.constexpr):
    """csa_indices (ROW_W = W > 0): token t's attention row starts with the window ring's slots of tokens
    max(p-W+1, 0) .. p, then -1 (window_slots, as attention_indices' kernel); its length is W + min(n, K). The top-k
    writes W + entry after them. ROW_W = 0 (indexer_topk): nothing."""
    if ROW_W > 0:
        c = tl.arange(0, WP)
        tl.store(idx_ptr + t * s_ot + c, window_slots(p, c, ROW_W).to(tl.int32), mask=c < ROW_W)
        tl.store(len_ptr + t, (ROW_W + tl.minimum(n, TOPK)).to(tl.int32))


@triton.jit
def _index_topk(sc_ptr, pos_ptr, stage_ptr, idx_ptr, val_ptr,       # stage (T, KP) int64; out (T, K)
                RATIO, TOPK, s_st, s_ot,
                KP: tl.constexpr, SCAN: tl.constexpr, FAST: tl.constexpr,
                len_ptr=None, ROW_W: tl.constexpr = 0, WP: tl.constexpr = 1, ROWB: tl.constexpr = 0,
                ROWL: tl.constexpr = 4, RADIX: tl.constexpr = True, TAIL: tl.constexpr = 0,
                STAGE_HELD: tl.constexpr = False, WINDOW: tl.constexpr = 0):
    """One program per token: select over its S4 scores, sort, write (ROW_W > 0, csa_indices: the attention row
    (T, W + K) and its length instead of the top-k (T, K); val (T, W + K) scratch)."""
    t = tl.program_id(0)
    p = tl.load(pos_ptr + t)
    n = (p + 1) // RATIO
    _row_head(idx_ptr, len_ptr, t, p, n, TOPK, s_ot, ROW_W, WP)
    _topk_row(sc_ptr + t * s_st, n, stage_ptr + t * KP, idx_ptr + t * s_ot + ROW_W, val_ptr + t * s_ot, TOPK, KP,
              SCAN, FAST, ROW_W, ROWB, ROWL, RADIX, TAIL, STAGE_HELD, WINDOW)


@triton.jit
def _index_topk_split(sc_ptr, pos_ptr, cand_ptr, thr_ptr, cnt_ptr, stage_ptr, idx_ptr, val_ptr,
                      RATIO, TOPK, SEG, SEG_MIN, s_st, s_ot,
                      SEG_P2: tl.constexpr, KP: tl.constexpr, SCAN: tl.constexpr, FAST: tl.constexpr,
                      FILTER: tl.constexpr = 2048, len_ptr=None, ROW_W: tl.constexpr = 0, WP: tl.constexpr = 1,
                      ROWB: tl.constexpr = 0, ROWL: tl.constexpr = 4, RADIX: tl.constexpr = True,
                      TAIL: tl.constexpr = 0, STAGE_HELD: tl.constexpr = False, WINDOW: tl.constexpr = 0,
                      MERGE_HELD: tl.constexpr = False):
    """The top-k of a long row over up to SEG programs, one launch, grid (T, SEG); cand (T, 2 SEG KP) int64, thr
    (T, 2 SEG) int64, cnt (T,) int32 zero between launches (`split_tickets`).
    The token's row of n scores is cut into a = min(SEG, n // SEG_MIN) segments (read on the device: the work
    follows the actual context, never the capacity), one when n <= TOPK. a = 1: program 0 runs the one-program
    top-k (_topk_row: a row of <= TOPK scores padded with -1) and the others exit. Else program j < a selects the
    TOPK largest of its segment (or keeps a segment of <= TOPK whole) into its candidate slot (packed, unsorted,
    zero-padded) with its threshold key l_j and its m-th key u_j (m = ceil(TOPK / a)), and takes a ticket. The
    last to arrive merges: the k-th largest of the row is >= max_j l_j (segment j alone holds TOPK keys >= l_j) and
    >= min_j u_j (a x m >= TOPK keys are >= it), so only candidates >= the larger bound can be in the top-k (at
    least TOPK of them, as n > TOPK); they are compacted in slot order
    (FILTER at a time), then selected and sorted as one row. Equal keys stay in index order through both steps
    (segments in row order; inside a slot the keys above l_j, then those equal to it, each in index order), so ties
    go to the lower index, as in the one-program select. ROW_W > 0 (csa_indices): program 0 writes the attention
    row's window part and length (_row_head), the top-k goes after it as W + entry. MERGE_HELD (config SPLIT_HELD,
    with held segments): each segment's m-th key and the merge's threshold by the held search over the packed
    candidates (`_kth_candidate`), not the radix passes."""
    t = tl.program_id(0)
    j = tl.program_id(1)
    p = tl.load(pos_ptr + t)
    n = (p + 1) // RATIO
    a = tl.minimum(tl.maximum(n // SEG_MIN, 1), SEG)
    a = tl.where(n <= TOPK, 1, a)             # a row of <= TOPK scores is packed and sorted whole by _topk_row: the
    sc_row = sc_ptr + t * s_st                # merge below assumes >= TOPK survivors (else its tail is unwritten)
    if j == 0:
        _row_head(idx_ptr, len_ptr, t, p, n, TOPK, s_ot, ROW_W, WP)
    if a == 1:
        if j == 0:
            _topk_row(sc_row, n, stage_ptr + t * KP, idx_ptr + t * s_ot + ROW_W, val_ptr + t * s_ot, TOPK, KP, SCAN,
                      FAST, ROW_W, ROWB, ROWL, RADIX, TAIL, STAGE_HELD, WINDOW)
    elif j < a:
        seg = tl.cdiv(tl.cdiv(n, a), 32) * 32                            # 128-byte aligned segment starts
        start = j * seg
        seg_n = tl.minimum(tl.maximum(n - start, 0), seg)
        cand = cand_ptr + t * (2 * SEG * KP)
        slot = cand + j * KP
        offs_k = tl.arange(0, KP)
        thr = tl.zeros([], tl.uint32)                                   # a segment kept whole: no bound
        if seg_n > TOPK:
            if FAST:
                thr = _select_fast(sc_row + start, seg_n, TOPK, slot, start, SCAN, ROWB, "", ROWL, RADIX, TAIL,
                                   STAGE_HELD, WINDOW)
            else:
                thr = _select(sc_row + start, seg_n, TOPK, slot, start, SCAN, False, False, "")
            kept = tl.load(slot + offs_k, mask=offs_k < TOPK, other=0)
        else:
            _, kept = _load_keys(sc_row, start + offs_k, offs_k < seg_n, 0, False, "")
            kept = tl.where(offs_k < seg_n, kept, 0).to(tl.int64, bitcast=True)
        tl.store(slot + offs_k, kept)                                   # pad with 0: below every key
        # the segment's m-th largest key, m = ceil(TOPK / a): a keys >= min_j of them over all segments, so the
        # row's k-th key is >= that minimum too (0, no bound, for a segment of fewer than m keys)
        m_j = tl.cdiv(TOPK, a)
        held = tl.minimum(seg_n, TOPK)
        tl.debug_barrier()
        thr_m = tl.zeros([], tl.uint32)
        if held >= m_j:
            thr_m, _ = _kth_candidate(slot, held, m_j, KP, KP, FAST, MERGE_HELD, "", WINDOW)
        tl.store(thr_ptr + t * (2 * SEG) + j, thr.to(tl.int64))
        tl.store(thr_ptr + t * (2 * SEG) + SEG + j, thr_m.to(tl.int64))
        tl.debug_barrier()                                              # every thread's stores before the release
        if tl.atomic_add(cnt_ptr + t, 1, sem="acq_rel", scope="gpu") == a - 1:
            js = tl.arange(0, SEG_P2)
            row = thr_ptr + t * (2 * SEG) + js
            tau = tl.max(tl.load(row, mask=js < a, other=0, cache_modifier=".cg"), axis=0)
            tau_m = tl.min(tl.load(row + SEG, mask=js < a, other=0, cache_modifier=".cg"), axis=0)
            tau = tl.maximum(tau, tau_m).to(tl.uint32)
            comp = cand + SEG * KP                                      # the survivors, in slot order
            m = 0
            for s0 in range(0, a * KP, FILTER):
                offs = s0 + tl.arange(0, FILTER)
                key, packed = _load_keys(cand, offs, offs < a * KP, 0, True, ".cg")
                keep = (offs < a * KP) & (key >= tau) & (packed != 0)
                dst = m + tl.cumsum(keep.to(tl.int32), axis=0) - 1
                tl.store(comp + dst, packed.to(tl.int64, bitcast=True), mask=keep)
                m += tl.sum(keep.to(tl.int32), axis=0)
            tl.debug_barrier()                                          # the survivors visible to the CTA
            prefix, k_rem = _kth_candidate(comp, m, TOPK, SCAN, SEG_P2 * KP, FAST, MERGE_HELD, "", WINDOW)
            _stage_top(comp, m, TOPK, prefix, k_rem, stage_ptr + t * KP, 0, SCAN, True, 16 if FAST else 0, "")
            _emit_sorted(stage_ptr + t * KP, TOPK, sc_row, idx_ptr + t * s_ot + ROW_W, val_ptr + t * s_ot, TOPK, 0,
                         KP, FAST, ".cg", ROW_W)
            tl.atomic_xchg(cnt_ptr + t, 0, sem="relaxed", scope="gpu")  # zero again for the next launch


@triton.jit
def _index_fused(qi_ptr, w_ptr, k_ptr, seq_ptr, pos_ptr, sc_ptr, cnt_ptr, stage_ptr, idx_ptr, val_ptr,
                 HI, RATIO, P, TOPK, w_scale, s_qt, s_qh, s_wt, s_kb, s_kn, s_st, s_ot,
                 DI: tl.constexpr, BLOCK_HI: tl.constexpr, BLOCK_S: tl.constexpr, KP: tl.constexpr,
                 SCAN: tl.constexpr, DOT_UPCAST: tl.constexpr, RNE_FIX: tl.constexpr, ASM: tl.constexpr = False,
                 HEAD_MMA: tl.constexpr = False):
    """Scores and top-k in one launch, grid (T, P): the token's first min(P, ceil(S4 / BS)) programs (at least
    one) score their blocks as _index_scores, store them, take a ticket from the token's counter (cnt, zero
    between launches); the last to arrive runs _index_topk's FAST select and sort over the row (loads
    bypassing L1: the other programs wrote it) and re-arms the counter. Programs past them exit at once."""
    t = tl.program_id(0)
    j = tl.program_id(1)
    n = ((tl.load(pos_ptr + t) + 1) // RATIO).to(tl.int32)
    active = tl.maximum(tl.minimum(P, tl.cdiv(n, BLOCK_S)), 1)
    if j < active:
        if j * BLOCK_S < n:
            _score_blocks(qi_ptr, w_ptr, k_ptr, seq_ptr, sc_ptr, t, j, n, HI, P, w_scale, s_qt, s_qh, s_wt, s_kb, s_kn, s_st,
                          DI, BLOCK_HI, BLOCK_S, DOT_UPCAST, RNE_FIX, ASM, HEAD_MMA)
        tl.debug_barrier()                                              # every thread's scores before the release
        if tl.atomic_add(cnt_ptr + t, 1, sem="acq_rel", scope="gpu") == active - 1:
            k_eff = tl.minimum(n, TOPK)
            sc_row = sc_ptr + t * s_st
            if n > TOPK:
                _select(sc_row, n, k_eff, stage_ptr + t * KP, 0, SCAN, False, True, ".cg")
            _emit_sorted(stage_ptr + t * KP, k_eff, sc_row, idx_ptr + t * s_ot, val_ptr + t * s_ot, TOPK, n <= TOPK,
                         KP, True, ".cg", 0)
            tl.atomic_xchg(cnt_ptr + t, 0, sem="relaxed", scope="gpu")  # zero again for the next launch


def fused_configs(params: dict) -> list[dict]:
    """One launch: keys per block, warps (the top-k runs with them too), programs (x SMs), the top-k's scan width."""
    return [{"BLOCK_S": bs, "num_warps": w, "num_stages": 3, "waves": wv, "SCAN": sc}
            for bs in (64, 128) for w in (4, 8, 16) for wv in (1, 2, 4) for sc in (1024, 2048, 4096)]


def fused_default(params: dict) -> dict:
    return {"BLOCK_S": 128, "num_warps": 8, "num_stages": 3, "waves": 2, "SCAN": 2048}


def _checked(qi, w, k_cache, seq_ids, positions, topk, ratio, w_scale, k_exp=None):
    """Checks shared by the impls (indexer_topk's and csa_indices') -> (device, T, Hi, KP), KP = pow2 >= topk.
    k_exp: k_cache is the FP4 key cache's codes (`_fp4_keys_form`)."""
    check_indexer_topk(qi, w, k_cache if k_exp is None else _fp4_keys_form(k_cache, k_exp), seq_ids, positions, topk,
                       ratio)
    check_w_scale(w_scale)
    dev = check_device(qi, w, k_cache, seq_ids, positions, k_exp)
    t, hi, _ = qi.shape
    if hi > 128:
        raise ValueError(f"indexer_topk: at most 128 heads per launch, got Hi={hi}")
    if k_cache.stride(2) != 1 or qi.stride(2) != 1 or (k_exp is not None and k_exp.stride(2) != 1):
        raise ValueError("indexer_topk: qi and k_cache (and k_exp) must be contiguous in the last dim")
    return dev, t, hi, max(16, triton.next_power_of_2(topk))


def _prepare(qi, w, k_cache, seq_ids, positions, topk, ratio, w_scale, k_exp=None):
    """_checked, and indexer_topk's outputs allocated -> (device, T, Hi, KP, idx, val)."""
    dev, t, hi, kp = _checked(qi, w, k_cache, seq_ids, positions, topk, ratio, w_scale, k_exp)
    idx = torch.empty(t, topk, dtype=torch.int32, device=dev)
    val = torch.empty(t, topk, dtype=torch.float32, device=dev)
    return dev, t, hi, kp, idx, val


@register_impl("indexer_topk", "triton_fused", backend="triton", configs=fused_configs, default_config=fused_default,
               options=frozenset({"BF16X2", "HEAD_MMA"}), kernels=lambda: [_index_fused])
def indexer_topk_fused(qi: torch.Tensor, w: torch.Tensor, k_cache: torch.Tensor, seq_ids: torch.Tensor,
                 positions: torch.Tensor, topk: int, ratio: int = 4, w_scale: float = 1.0,
                 config: dict | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """-> indices [T, topk] int32 (best first, ties to the lower index, -1 padded), scores [T, topk]
    fp32 holding bf16 values (-inf padded). Positions past the capacity are the caller's bug (no
    device-side check). One launch (_index_fused); the per-token counters are the split-K tickets of
    kernels/linear.py (zero between launches, one stream)."""
    dev, t, hi, kp, idx, val = _prepare(qi, w, k_cache, seq_ids, positions, topk, ratio, w_scale)
    cfg = config or lookup("indexer_topk", {"T": t, "Hi": hi, "K": topk, "kernel": "fused"}, fused_default({}))
    if t == 0:
        return idx, val
    scores = torch.empty(t, k_cache.shape[1], dtype=torch.float32, device=dev)   # allocation only
    stage = torch.empty(t, kp, dtype=torch.int64, device=dev)
    w = w.contiguous()                                                   # the kernel reads w rows unit-stride
    p = max(1, triton.cdiv(cfg["waves"] * sm_count(dev), t))
    _index_fused[(t, p)](
        qi, w, k_cache, seq_ids.contiguous(), positions.contiguous(), scores, split_tickets(dev, t), stage, idx, val,
        hi, ratio, p, topk, float(w_scale), qi.stride(0), qi.stride(1), w.stride(0), k_cache.stride(0), k_cache.stride(1),
        scores.stride(0), idx.stride(0),
        DI=DI, BLOCK_HI=max(16, triton.next_power_of_2(hi)), BLOCK_S=cfg["BLOCK_S"], KP=kp,
        SCAN=scan_width(cfg["SCAN"]), DOT_UPCAST=INTERPRET, RNE_FIX=INTERPRET, **score_options(cfg),
        num_warps=cfg["num_warps"], num_stages=cfg["num_stages"])
    return idx, val


# the held select's config keys that neither the space nor the default show (`held_plan`), and the score launch's
# BF16X2 and HEAD_MMA (`score_options`)
HELD_OPTIONS = frozenset({"ROW_LEVELS", "ROW_TAIL", "STAGE_HELD", "SEARCH_WINDOW", "SPLIT_HELD", "BF16X2",
                          "HEAD_MMA"})


def score_options(cfg: dict, interpret: bool = INTERPRET) -> dict:
    """The score launch's constexprs from its config: ASM, the head terms in bf16x2 PTX (`relu_scale_bf16`; config
    BF16X2, default True; never under the interpreter, which has no PTX: docs/perf/attention.md, session 31), and
    HEAD_MMA, their sum on the tensor cores (`_score_tile`; config HEAD_MMA, default False: session 32)."""
    return {"ASM": _flag(cfg, "BF16X2", True) and not interpret, "HEAD_MMA": _flag(cfg, "HEAD_MMA", False)}


@register_impl("indexer_topk", "triton", backend="triton", configs=indexer_configs,
               default_config=indexer_default, options=HELD_OPTIONS,
               kernels=lambda: [_index_scores, _index_topk, _index_topk_split])
def indexer_topk(qi: torch.Tensor, w: torch.Tensor, k_cache: torch.Tensor, seq_ids: torch.Tensor,
                    positions: torch.Tensor, topk: int, ratio: int = 4, w_scale: float = 1.0,
                    config: dict | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Two launches: `_index_scores`, then `_index_topk` or the split top-k `_index_topk_split` (`topk_segments`:
    SEGMENTS "auto", the default, or a count); the FAST top-k (16-bit select keys, no select for rows of <= topk
    scores)."""
    dev, t, hi, kp, idx, val = _prepare(qi, w, k_cache, seq_ids, positions, topk, ratio, w_scale)
    cfg = config or lookup("indexer_topk", {"T": t, "Hi": hi, "K": topk}, indexer_default({}))
    _scores_then_topk(qi, w, k_cache, seq_ids, positions, topk, ratio, w_scale, cfg, dev, kp, idx, val)
    return idx, val


def index_scores(qi, w, k_cache, seq_ids, positions, ratio, w_scale, cfg, dev, k_exp=None) -> torch.Tensor:
    """The score launch alone -> scores (T, Ncap) fp32, written below each token's (p + 1) // ratio keys (the rest
    is unwritten memory). k_exp: k_cache is the FP4 key cache's codes (impl triton_fp4keys)."""
    t, hi = qi.shape[0], qi.shape[1]
    scores = torch.empty(t, k_cache.shape[1], dtype=torch.float32, device=dev)   # allocation only
    w = w.contiguous()                                                   # the kernel reads w rows unit-stride
    p = max(1, triton.cdiv(cfg["waves"] * sm_count(dev), t))
    fp4 = {} if k_exp is None else {"KEY_FP4": True, "ke_ptr": k_exp, "s_eb": k_exp.stride(0), "s_en": k_exp.stride(1),
                                     "GROUP": KEY_GROUP}
    _index_scores[(t, p)](
        qi, w, k_cache, seq_ids.contiguous(), positions.contiguous(), scores, hi, ratio, p, float(w_scale),
        qi.stride(0), qi.stride(1), w.stride(0), k_cache.stride(0), k_cache.stride(1), scores.stride(0),
        DI=DI, BLOCK_HI=max(16, triton.next_power_of_2(hi)), BLOCK_S=cfg["BLOCK_S"], DOT_UPCAST=INTERPRET,
        RNE_FIX=INTERPRET, **score_options(cfg), **fp4, num_warps=cfg["num_warps"], num_stages=cfg["num_stages"])
    return scores


def _scores_then_topk(qi, w, k_cache, seq_ids, positions, topk, ratio, w_scale, cfg, dev, kp, idx, val,
                      window: int = 0, lengths: torch.Tensor | None = None, k_exp=None) -> None:
    """indexer_topk's two launches into idx / val (window 0), or csa_indices' (window W: idx the attention rows
    (T, W + K), val a scratch of the same shape, lengths (T,)). k_exp: the FP4 key cache (index_scores)."""
    t = qi.shape[0]
    if t == 0:
        return
    pos = positions.contiguous()
    scores = index_scores(qi, w, k_cache, seq_ids, pos, ratio, w_scale, cfg, dev, k_exp)
    stage = torch.empty(t, kp, dtype=torch.int64, device=dev)
    scan, twarps, seg = scan_width(cfg.get("SCAN", 4096)), cfg.get("TOPK_WARPS", 16), cfg.get("SEGMENTS", "auto")
    fast = bool(cfg.get("FAST", True))
    seg_min = int(cfg.get("SEG_MIN") or seg_min_default(t))
    seg = topk_segments(seg, t, dev, k_cache.shape[1], seg_min, fast and holds_row(cfg, k_cache.shape[1]))
    row = {"len_ptr": lengths, "ROW_W": window, "WP": triton.next_power_of_2(window)} if window else {}
    if not fast:
        row["ROWB"] = 0
    elif seg > 1 and _flag(cfg, "SPLIT_HELD", False):
        row.update(split_held_plan(cfg, k_cache.shape[1], seg, seg_min, kp, twarps))
    else:
        row.update(held_plan(cfg, k_cache.shape[1], seg > 1, twarps))
    if seg <= 1:
        _index_topk[(t,)](scores, pos, stage, idx, val, ratio, topk, scores.stride(0), idx.stride(0),
                          KP=kp, SCAN=scan, FAST=fast, num_warps=twarps, num_stages=1, **row)
    else:
        cand = torch.empty(t, 2 * seg * kp, dtype=torch.int64, device=dev)   # candidates, then the survivors
        thr = torch.empty(t, 2 * seg, dtype=torch.int64, device=dev)           # the segments' two bounds
        _index_topk_split[(t, seg)](scores, pos, cand, thr, split_tickets(dev, t), stage, idx, val, ratio, topk, seg,
                                    seg_min, scores.stride(0), idx.stride(0),
                                    SEG_P2=triton.next_power_of_2(seg), KP=kp, SCAN=scan, FAST=fast,
                                    FILTER=split_filter(scan), num_warps=twarps, num_stages=1, **row)


# csa_indices -------------------------------------------------------------------------------------
# impl "triton": indexer_topk's two launches, the top-k writing the attention row itself (_row_head: the window
# ring's slots and the length; then W + each selected entry): the csa layer's index lists without attention_indices'
# launch, which sat on the path the decode step's sparse attention waits on (H200, session 23 call 2: at C = 1 the
# main lane waited 164 us a step on the top-k and 42 us on the csa index lists). Impl "triton_parts": the two ops.
def csa_configs(params: dict) -> list[dict]:
    """indexer_topk's space, and ROW False: the two ops as before (indexer_topk, then attention_indices, each with its
    own tuned config), so that `decode-bench --try 'csa_indices={"ROW": false}'` times the step with and without the
    row written by the top-k in interleaved pairs."""
    return indexer_configs(params) + [{**indexer_default(params), "ROW": False}]


@register_impl("csa_indices", "triton", backend="triton", configs=csa_configs, default_config=indexer_default,
               options=HELD_OPTIONS, kernels=lambda: [_index_scores, _index_topk, _index_topk_split])
def csa_indices(qi: torch.Tensor, w: torch.Tensor, k_cache: torch.Tensor, seq_ids: torch.Tensor,
                positions: torch.Tensor, topk: int, window: int, ratio: int = 4, w_scale: float = 1.0,
                config: dict | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """-> indices [T, W + topk] int32, lengths [T] int32 (contract: reference/indexer.py csa_indices). Two launches,
    indexer_topk's; its config space and default (a tuned entry of its own op: the key has no window); config ROW
    False: the two ops (csa_indices_parts)."""
    check_window("csa_indices", window)
    dev, t, hi, kp = _checked(qi, w, k_cache, seq_ids, positions, topk, ratio, w_scale)
    cfg = config or lookup("csa_indices", {"T": t, "Hi": hi, "K": topk}, indexer_default({}))
    if not cfg.get("ROW", True):
        return csa_indices_parts(qi, w, k_cache, seq_ids, positions, topk, window, ratio, w_scale)
    return _csa_rows(qi, w, k_cache, seq_ids, positions, topk, window, ratio, w_scale, cfg, dev, kp)


def _csa_rows(qi, w, k_cache, seq_ids, positions, topk, window, ratio, w_scale, cfg, dev, kp, k_exp=None):
    """csa_indices' two launches on checked inputs (k_exp: the FP4 key cache) -> (rows [T, W + topk], lengths [T])."""
    t = qi.shape[0]
    rows = torch.empty(t, window + topk, dtype=torch.int32, device=dev)
    lengths = torch.empty(t, dtype=torch.int32, device=dev)
    scratch = torch.empty(t, window + topk, dtype=torch.float32, device=dev)   # the top-k's scores, not returned
    _scores_then_topk(qi, w, k_cache, seq_ids, positions, topk, ratio, w_scale, cfg, dev, kp, rows, scratch,
                      window, lengths, k_exp)
    return rows, lengths


def _parts_kernels():
    return [_index_scores, _index_topk, _index_topk_split, _attention_indices_kernel]


@register_impl("csa_indices", "triton_parts", backend="triton", configs=lambda p: [{}], default_config=lambda p: {},
               kernels=_parts_kernels)
def csa_indices_parts(qi: torch.Tensor, w: torch.Tensor, k_cache: torch.Tensor, seq_ids: torch.Tensor,
                      positions: torch.Tensor, topk: int, window: int, ratio: int = 4, w_scale: float = 1.0,
                      config: dict | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """The two ops as the decoder called them before (three launches): indexer_topk, then attention_indices (csa),
    each with its own tuned config."""
    check_window("csa_indices", window)
    idx, _ = indexer_topk(qi, w, k_cache, seq_ids, positions, topk, ratio, w_scale)
    return attention_indices(positions, "csa", window, ratio, idx, window + topk)


# impl "triton_fp4keys": the indexer's key cache stored as FP4 (SPEC 2, "KV cache storage") -------------------------
KEY_EXP_MAX = 240   # the largest exponent byte the score launch decodes (`_fp4_key_rows`: 2^(e - 113) finite)


def pack_fp4_keys(k_cache: torch.Tensor):
    """k_cache [B, N, 128] bf16 -> the FP4 key form (reference/indexer.py: codes [B, N, 64] uint8, two e2m1 codes a
    byte, the low nibble the even dim; exponents [B, N, 4] uint8, 2^(e - 127) per 32 dims, 255 for a group NaN
    throughout, as the op's never-read rows) by `fp4_key_rows`, kept only if it gives back every key (kernels/
    linear.py gives_back), else None; None also for a group scale past 2^113 (KEY_EXP_MAX) and for a subnormal key
    value (below 2^-126); keys of N(0, 1) scale take scales about 2^-1. Every key the model stores packs: the
    indexer compressor Hadamard-rotates each entry, then FP4-simulates it in groups of 32. 68 bytes a key instead of
    256."""
    if not isinstance(k_cache, torch.Tensor) or k_cache.dtype != torch.bfloat16 or k_cache.dim() != 3 \
            or k_cache.shape[2] != DI:
        return None
    b, n, _ = k_cache.shape
    x = k_cache.reshape(b * n, DI)
    xf = x.float()
    if bool(((xf != 0) & (xf.abs() < 2.0 ** -126)).any()):  # subnormal: the decode's fp32 product would be one
        return None
    nan = torch.isnan(xf).reshape(b * n, DI // KEY_GROUP, KEY_GROUP).all(-1)          # never-read groups
    codes, exps = fp4_key_rows(torch.where(nan.repeat_interleave(KEY_GROUP, -1), 0.0, x).to(torch.bfloat16))
    exps = torch.where(nan, 255, exps.int()).to(torch.uint8)
    if not gives_back(unpack_fp4_keys(codes, exps).float(), xf) or bool(((exps > KEY_EXP_MAX) & ~nan).any()):
        return None
    return codes.reshape(b, n, DI // 2).contiguous(), exps.reshape(b, n, DI // KEY_GROUP).contiguous()


def prepare_fp4_keys(inputs: dict) -> dict:
    """Impl.prepare of triton_fp4keys: k_cache as `pack_fp4_keys` stores it (k_cache the codes, k_exp) when it is an
    FP4-simulated key cache; otherwise unchanged (the bf16 path)."""
    packed = pack_fp4_keys(inputs.get("k_cache"))
    if packed is None:
        return inputs
    return {**inputs, "k_cache": packed[0], "k_exp": packed[1]}


def _fp4_keys_form(codes: torch.Tensor, k_exp: torch.Tensor) -> torch.Tensor:
    """The FP4 key cache's checks (reference/indexer.py check_fp4_keys) -> a bf16 stand-in [B, N, 128] (no storage)
    for the bf16 cache's shape checks."""
    check_fp4_keys(codes, k_exp)
    return torch.empty((1, 1, 1), dtype=torch.bfloat16, device=codes.device).expand(codes.shape[0], codes.shape[1], DI)


def fp4keys_configs(params: dict) -> list[dict]:
    """indexer_configs' block grid without 128-key blocks at 4 warps (each key block is made bf16 in registers:
    that one spills 32 B on sm_120), and the path configs from fp4keys_default."""
    grid = [c for c in indexer_configs(params)[:-len(_path_configs({}))]
            if not (c["BLOCK_S"] == 128 and c["num_warps"] == 4)]
    return grid + _path_configs(fp4keys_default(params))


def fp4keys_default(params: dict) -> dict:
    """64-key blocks: sm_120 217 registers, 25,088 B of shared memory, two programs an SM, no spill; sm_90 114
    registers, four programs an SM (impl triton's 128-key default: 242 / 82,944 B / one, and 118 / two;
    scripts/sass_mix.py indexer_topk --where T=64)."""
    return {**indexer_default(params), "BLOCK_S": 64}


@register_impl("indexer_topk", "triton_fp4keys", backend="triton", configs=fp4keys_configs,
               default_config=fp4keys_default, options=HELD_OPTIONS,
               kernels=lambda: [_index_scores, _index_topk, _index_topk_split], prepare=prepare_fp4_keys,
               form="fp4keys")
def indexer_topk_fp4keys(qi: torch.Tensor, w: torch.Tensor, k_cache: torch.Tensor, seq_ids: torch.Tensor,
                         positions: torch.Tensor, topk: int, ratio: int = 4, w_scale: float = 1.0,
                         k_exp: torch.Tensor | None = None,
                         config: dict | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Impl triton's two launches on the key cache stored as FP4 (`pack_fp4_keys`: 68 bytes a key instead of 256),
    the score launch making each key block bf16 again (`_fp4_key_rows`): the same keys, so the output equals impl
    triton's bit for bit at the same config. Without k_exp, k_cache is the bf16 cache (impl triton)."""
    if k_exp is None:
        return indexer_topk(qi, w, k_cache, seq_ids, positions, topk, ratio, w_scale, config)
    dev, t, hi, kp, idx, val = _prepare(qi, w, k_cache, seq_ids, positions, topk, ratio, w_scale, k_exp)
    cfg = config or lookup("indexer_topk", {"T": t, "Hi": hi, "K": topk, "kernel": "fp4keys"}, fp4keys_default({}))
    _scores_then_topk(qi, w, k_cache, seq_ids, positions, topk, ratio, w_scale, cfg, dev, kp, idx, val, k_exp=k_exp)
    return idx, val


@register_impl("csa_indices", "triton_fp4keys", backend="triton", configs=fp4keys_configs,
               default_config=fp4keys_default, options=HELD_OPTIONS,
               kernels=lambda: [_index_scores, _index_topk, _index_topk_split], prepare=prepare_fp4_keys,
               form="fp4keys")
def csa_indices_fp4keys(qi: torch.Tensor, w: torch.Tensor, k_cache: torch.Tensor, seq_ids: torch.Tensor,
                        positions: torch.Tensor, topk: int, window: int, ratio: int = 4, w_scale: float = 1.0,
                        k_exp: torch.Tensor | None = None,
                        config: dict | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Impl triton of csa_indices (the top-k writing the attention rows) on the FP4 key cache, as
    indexer_topk_fp4keys: bit-equal to impl triton at the same config. Without k_exp, impl triton."""
    if k_exp is None:
        return csa_indices(qi, w, k_cache, seq_ids, positions, topk, window, ratio, w_scale, config)
    check_window("csa_indices", window)
    dev, t, hi, kp = _checked(qi, w, k_cache, seq_ids, positions, topk, ratio, w_scale, k_exp)
    cfg = config or lookup("csa_indices", {"T": t, "Hi": hi, "K": topk, "kernel": "fp4keys"}, fp4keys_default({}))
    if not cfg.get("ROW", True):
        raise ValueError("csa_indices: config ROW False (the two ops) does not read the FP4 key cache")
    return _csa_rows(qi, w, k_cache, seq_ids, positions, topk, window, ratio, w_scale, cfg, dev, kp, k_exp)


MAX_SEGMENTS = 64
MAX_ROW_REGS = 32768
MAX_SCAN = 16384
# "auto": the held select WITHOUT the radix passes (held-only, one block of the smallest power of two >= the cache's
# capacity, at least 1024) in the one-program top-k when the key cache holds no row longer than MAX_ROW_REGS; the
# radix passes otherwise (longer caches, and the split top-k of few tokens, whose merge selects by radix anyway).
# H200, session 27 (docs/perf/attention.md), the whole step at 64K tokens (decode-bench --try, 40 pairs): held-only
# with one 32768 block +0.310 / +0.319 ms faster at C = 16 / 64 than the radix select, with blocks 16384 and 32768
# +0.235 / +0.229; while every kernel that compiled the held select AND the radix passes made the step slower (ROW_REGS
# 16384 with four blocks -0.24, with one -0.13, ROW_REGS 1024, never run at 64K, -0.21 ms): the loss came with the
# binary, not the select.
ROW_REGS_DEFAULT = "auto"
# The largest held block whose select stages from its registers (config STAGE_HELD): larger blocks stage by
# _stage_top's pass over the row (one block-wide scan of a block's packed flags at a time).
STAGE_HELD_MAX = 16384


def scan_width(value) -> int:
    """Config SCAN: scores per step of the top-k's passes, a power of two up to MAX_SCAN (`_stage_top` packs two
    per-step counts in 16 bits each)."""
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_SCAN or value & (value - 1):
        raise ValueError(f"indexer_topk: SCAN must be a power of two up to {MAX_SCAN}, got {value!r}")
    return value


def row_regs(value) -> int | str:
    """Config ROW_REGS: the longest row (or split segment) of scores the FAST top-k holds in registers and selects
    from by counting (_select_held: one read of the row); longer rows take the radix passes. 0 (off: the radix
    passes always), "auto" (`held_plan`) or a power of two from 1024 to MAX_ROW_REGS; a config without it:
    ROW_REGS_DEFAULT."""
    if isinstance(value, str) and value == "auto":
        return value
    if isinstance(value, bool) or not isinstance(value, int) or (
            value != 0 and (not 1024 <= value <= MAX_ROW_REGS or value & (value - 1))):
        raise ValueError(f"indexer_topk: ROW_REGS must be 0, \"auto\" or a power of two from 1024 to "
                         f"{MAX_ROW_REGS}, got {value!r}")
    return value


ROW_LEVELS_DEFAULT = 4


def row_levels(value) -> int:
    """Config ROW_LEVELS: how many held block sizes the top-k compiles (1: ROW_REGS; 2: ROW_REGS / 2 and ROW_REGS;
    4, the default with a numeric ROW_REGS: ROW_REGS / 8 .. ROW_REGS; ROW_REGS "auto": 1); a row takes the smallest
    that holds it. Fewer levels: a smaller kernel, short rows counted in a wider block."""
    if isinstance(value, bool) or not isinstance(value, int) or value not in (1, 2, 4):
        raise ValueError(f"indexer_topk: ROW_LEVELS must be 1, 2 or 4, got {value!r}")
    return value


def held_only(rowb: int, capacity: int) -> bool:
    """Whether every row of a key cache of `capacity` entries fits the held select of ROW_REGS `rowb` (rows, and so
    split segments, never exceed the capacity: the ops' contract), so the top-k kernel is compiled without the radix
    passes (RADIX False)."""
    return 0 < capacity <= rowb


def holds_row(cfg: dict, capacity: int) -> bool:
    """Whether ROW_REGS "auto" (the default) lets the one-program top-k hold a whole row of a `capacity`-entry key
    cache in registers (held-only, no radix passes): capacity <= MAX_ROW_REGS."""
    return row_regs(cfg.get("ROW_REGS", ROW_REGS_DEFAULT)) == "auto" and held_only(MAX_ROW_REGS, capacity)


def _flag(cfg: dict, key: str, default: bool) -> bool:
    value = cfg.get(key, default)
    if not isinstance(value, bool):
        raise ValueError(f"indexer_topk: {key} must be true or false, got {value!r}")
    return value


SEARCH_WINDOW_DEFAULT = 512


def search_window(value) -> int:
    """Config SEARCH_WINDOW: 0 (the held select's binary search over all 65536 key halves: 16 counts) or a power of
    two from 2 to 32768: the halves below the row's largest that its first count tries (`_select_held`)."""
    if isinstance(value, bool) or not isinstance(value, int) or (
            value != 0 and (not 2 <= value <= 32768 or value & (value - 1))):
        raise ValueError(f"indexer_topk: SEARCH_WINDOW must be 0 or a power of two from 2 to 32768, got {value!r}")
    return value


def held_block(capacity: int, warps: int, tail: bool = True) -> tuple[int, int]:
    """ROW_REGS "auto"'s held blocks for a `capacity`-entry key cache: (ROWB, TAIL). One block of the smallest power
    of two >= capacity (at least 1024), or with `tail` (config ROW_TAIL, default true), where it is smaller, half of
    that and a tail block of the excess rounded up to a power of two and to one score per thread (`warps` x 32):
    the decode step's cache at 64K tokens holds 16,400 entries, counted over 16384 + 512 instead of 32768."""
    full = max(1024, triton.next_power_of_2(capacity))
    main = full // 2
    if tail and capacity > main:
        rest = max(triton.next_power_of_2(capacity - main), 32 * warps)
        if rest < main:
            return main, rest
    return full, 0


def held_plan(cfg: dict, capacity: int, split: bool, warps: int = 16) -> dict:
    """The top-k launch's select constexprs from config ROW_REGS / ROW_LEVELS / ROW_TAIL / STAGE_HELD /
    SEARCH_WINDOW and the key cache's capacity: ROWB (0: the radix passes), ROWL (held block sizes), RADIX (False:
    held-only), TAIL (a tail block after ROWB, `held_block`), STAGE_HELD (the stage from the held registers,
    `_select_held`; config STAGE_HELD, default true, and only for blocks of up to STAGE_HELD_MAX) and WINDOW (the
    held search's first count, `search_window`). "auto" (the default): held-only in
    `held_block`'s blocks when the one-program top-k runs (`split` False) and capacity <= MAX_ROW_REGS, else the
    radix passes. A short row in a large cache is then counted over the whole block (at most MAX_ROW_REGS: a
    bounded cost, while rows of <= K scores skip the select). `warps`: the top-k launch's (TOPK_WARPS)."""
    value = row_regs(cfg.get("ROW_REGS", ROW_REGS_DEFAULT))
    tail, stage = _flag(cfg, "ROW_TAIL", True), _flag(cfg, "STAGE_HELD", True)
    window = search_window(cfg.get("SEARCH_WINDOW", SEARCH_WINDOW_DEFAULT))
    if value == "auto":
        if split or not holds_row(cfg, capacity):
            return {"ROWB": 0}
        rowb, rest = held_block(capacity, warps, tail)
        return {"ROWB": rowb, "TAIL": rest, "ROWL": row_levels(cfg.get("ROW_LEVELS", 1)), "RADIX": False,
                "STAGE_HELD": stage and rowb <= STAGE_HELD_MAX, "WINDOW": window}
    if value == 0:
        return {"ROWB": 0}
    return {"ROWB": value, "ROWL": row_levels(cfg.get("ROW_LEVELS", ROW_LEVELS_DEFAULT)),
            "RADIX": not held_only(value, capacity), "STAGE_HELD": stage and value <= STAGE_HELD_MAX,
            "WINDOW": window}


def split_longest(capacity: int, seg: int, seg_min: int) -> int:
    """The most scores one program of `_index_topk_split` selects over in a cache of `capacity` entries: a row of
    n splits into a = min(seg, max(n // seg_min, 1)) segments of ceil(n / a) rounded up to 32 (a = 1: the whole
    row, `_topk_row`)."""
    longest = min(capacity, 2 * seg_min - 1)                             # a = 1
    for a in range(2, seg + 1):
        if capacity < a * seg_min:
            break
        n = capacity if a == seg else min(capacity, (a + 1) * seg_min - 1)
        longest = max(longest, -(-(-(-n // a)) // 32) * 32)
    return longest


def split_held_plan(cfg: dict, capacity: int, seg: int, seg_min: int, kp: int, warps: int = 16) -> dict:
    """Config SPLIT_HELD (default false; ROW_REGS "auto"): the split top-k's segments by the held select (`held_plan`
    of the longest segment, `split_longest`: held-only) and its bounds and merge by the held search over the packed
    candidates (MERGE_HELD), where the longest segment and the merge's SEG x KP candidates fit MAX_ROW_REGS; else
    the radix passes, as without it."""
    if row_regs(cfg.get("ROW_REGS", ROW_REGS_DEFAULT)) != "auto":
        raise ValueError("indexer_topk: SPLIT_HELD takes ROW_REGS \"auto\"")
    if triton.next_power_of_2(seg) * kp > MAX_ROW_REGS:
        return {"ROWB": 0}
    plan = held_plan(cfg, split_longest(capacity, seg, seg_min), False, warps)   # the one-program plan of a segment
    return {**plan, "MERGE_HELD": True} if plan["ROWB"] else plan


def split_filter(scan: int) -> int:
    """Candidates the split top-k's merge compacts per step (FILTER): the scan width, at most 2048."""
    return min(2048, scan)


def seg_min_default(t: int) -> int:
    """Fewest scores per segment of the split top-k. Its merge costs about one select over a few thousand
    candidates, so a segment must save more than that: at T <= 4 tokens the launch is otherwise a few programs
    and 4096-score segments pay (H200, C=1: 64K tokens 47.2 -> 37.5 us, 1M 650 -> 99 us); with more tokens the
    tokens themselves fill the GPU and 4096-score segments lost at 64K (C=16 68.5 -> 73.2, C=64 134.6 -> 153.2
    us), so only rows of 2 x 16K+ scores are split (docs/perf/attention.md, session 8). Those were radix
    one-program top-ks; a row the held select holds is no longer split at all (`topk_segments`)."""
    return 4096 if t <= 4 else 16384


def topk_segments(segments: int | str, t: int, device: torch.device, capacity: int, seg_min: int,
                  held: bool = False) -> int:
    """Programs per token of the top-k launch: config SEGMENTS, or "auto": 1 when the one-program top-k can hold
    the whole row (`held`: the held-only select of ROW_REGS "auto", capacity <= MAX_ROW_REGS), else about 4
    programs per SM (a power of two, at most MAX_SEGMENTS), and no more than a row of `capacity` scores can fill
    with seg_min each (a cache that cannot hold a row long enough to split runs the one-program kernel, whose
    results are the same); 1 = the one-program top-k. How many of them work is decided on the device from the
    row's actual length (`_index_topk_split`). The held rule: at one token and 64K tokens the held-only one-program
    top-k beat the split one alone (34.63 against 37.09 us, 16,384 cached entries) and in the 43-layer step (4.330
    against 4.610 ms, 40 pairs; 16,400 entries, one 32768 block; H200, session 29 call 1)."""
    if segments != "auto" and (isinstance(segments, bool) or not isinstance(segments, int)
                               or not 1 <= segments <= MAX_SEGMENTS):
        raise ValueError(f"indexer_topk: SEGMENTS must be \"auto\" or 1 to {MAX_SEGMENTS}, got {segments!r}")
    if seg_min < 1:
        raise ValueError(f"indexer_topk: SEG_MIN must be >= 1, got {seg_min}")
    if segments != "auto":
        return segments
    if held:
        return 1
    per_token = min(4 * sm_count(device) // max(t, 1), capacity // seg_min)
    return min(MAX_SEGMENTS, 1 << max(per_token, 1).bit_length() - 1)


@register_impl("indexer_topk", "triton_v1", backend="triton", configs=indexer_configs,
               default_config=lambda p: {**indexer_default(p), "FAST": False, "SEGMENTS": 1},
               kernels=lambda: [_index_scores, _index_topk, _index_topk_split])
def indexer_topk_v1(qi, w, k_cache, seq_ids, positions, topk: int, ratio: int = 4, w_scale: float = 1.0,
                    config: dict | None = None):
    """The first version's top-k (kept to measure against): four 8-bit radix passes over 32-bit keys, the
    select even when the row has <= topk scores, and a gather of the scores; one program per token."""
    t, hi = qi.shape[0], qi.shape[1]
    cfg = config or lookup("indexer_topk", {"T": t, "Hi": hi, "K": topk}, indexer_default({}))
    return indexer_topk(qi, w, k_cache, seq_ids, positions, topk, ratio, w_scale,
                        config={"SEGMENTS": 1, **cfg, "FAST": False})


# indexer_q --------------------------------------------------------------------------------------
# impl "triton", PATH "fused": one launch at M <= PROLOGUE_QUANT_MAX_M (else an act_quant pre-pass, as fp8_linear): the
# fp8 GEMM (kernels/linear.py fp8_tile_head_ticket: fp8_gemm_tile, split K finished by splitk_store's last program,
# the head ticket), then per (row block, head) the
# last of the head's 128 / BN tiles to finish takes a ticket and runs RoPE + Hadamard + FP4 on its rows in registers
# (Hadamard as one [RB, 128] x [128, 128] tensor-core product with the +-1 matrix). Impl "triton_v1": fp8_linear,
# then `_indexer_q_epilogue` (two launches; the output is the scratch between the steps), which is also impl "triton"
# with PATH "split" (the default except at many tokens and heads, indexer_q_default).
@triton.jit
def rope_rows(y, ang, f_ptr, DD: tl.constexpr, R: tl.constexpr, RNE_FIX: tl.constexpr):
    """y (RB, DD) fp32 -> the same with RoPE on the last R dims as interleaved (even, odd) pairs at angles ang (RB,)
    times f (R/2,), each rotated value rounded to bf16; the other dims unchanged."""
    RB: tl.constexpr = y.shape[0]
    ye, yo = tl.split(tl.reshape(y, [RB, DD // 2, 2]))
    i = tl.arange(0, DD // 2)
    rot = (i >= (DD - R) // 2)[None, :]
    f = tl.load(f_ptr + i - (DD - R) // 2, mask=i >= (DD - R) // 2, other=0.0)
    sn, cs = sincos(ang[:, None] * f[None, :])
    ne = tl.where(rot, to_bf16(ye * cs - yo * sn, RNE_FIX).to(tl.float32), ye)
    no = tl.where(rot, to_bf16(ye * sn + yo * cs, RNE_FIX).to(tl.float32), yo)
    return tl.reshape(tl.join(ne, no), [RB, DD])


@triton.jit
def hadamard_fp4_rows(y, RNE_FIX: tl.constexpr, DOT_UPCAST: tl.constexpr):
    """y (RB, 128) fp32 holding bf16 values, RB >= 16 -> bf16 (RB, 128): y @ H_128 / sqrt(128) rounded to bf16 (the
    +-1 products are exact, fp32 sums on tensor cores), then the FP4 simulation (group 32)."""
    RB: tl.constexpr = y.shape[0]
    h = hadamard128_rows(y, RNE_FIX, DOT_UPCAST).to(tl.float32)
    return tl.reshape(fp4_simulate_rows(tl.reshape(h, [RB * 4, 32])), [RB, 128])


@triton.jit
def _indexer_q_kernel(x_ptr, sx_ptr, w_ptr, ws_ptr, y_ptr, part_ptr, cnt_ptr, pos_ptr, f_ptr, M, N, K, sxm, HL,
                      R: tl.constexpr, KB_SPLIT: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr,
                      SPLIT: tl.constexpr, RB: tl.constexpr, QUANT: tl.constexpr, HW_CVT: tl.constexpr,
                      RNE_FIX: tl.constexpr, DOT_UPCAST: tl.constexpr, NB: tl.constexpr = 1,
                      PDL: tl.constexpr = False, HEAD_SUM: tl.constexpr = False, STAGED: tl.constexpr = False,
                      PROMOTE: tl.constexpr = 0):
    # x (M, K) as fp8_linear; y (M, HL, 128) bf16; part (S, M, N) fp32; cnt: tile tickets, then one per (row block,
    # head) (kernels/linear.py fp8_tile_head_ticket; HEAD_SUM: the head's ticket only)
    last, ticket, head, pid_m = fp8_tile_head_ticket(x_ptr, sx_ptr, w_ptr, ws_ptr, y_ptr, part_ptr, cnt_ptr, M, N, K,
                                                     sxm, HL, 128, KB_SPLIT, BM, BN, SPLIT, QUANT, HW_CVT, RNE_FIX,
                                                     NB, PDL, HEAD_SUM, 128, STAGED, PROMOTE)
    if last:
        d = tl.arange(0, 128)
        for r0 in range(0, tl.minimum(BM, M - pid_m * BM), RB):
            tok = pid_m * BM + r0 + tl.arange(0, RB)
            mine = (tok < M) & (tok < (pid_m + 1) * BM)   # RB >= 16 rows (the Hadamard's MMA) may pass the block
            tmask = mine[:, None]
            row = y_ptr + (tok.to(tl.int64) * HL + head)[:, None] * 128 + d[None, :]
            q = tl.load(row, mask=tmask, other=0.0, cache_modifier=".cg").to(tl.float32)
            ang = tl.load(pos_ptr + tok, mask=mine, other=0).to(tl.float32)
            q = rope_rows(q, ang, f_ptr, 128, R, RNE_FIX)
            tl.store(row, hadamard_fp4_rows(q, RNE_FIX, DOT_UPCAST), mask=tmask)
        tl.atomic_xchg(ticket, 0, sem="relaxed", scope="gpu")


def _check_indexer_q(qr, weight, weight_scale, positions, freqs) -> tuple[int, torch.device]:
    """-> (R, device) after the shape checks both implementations share."""
    if weight.dim() != 2 or weight.shape[0] % DI:
        raise ValueError(f"indexer_q: weight must be [Hi*128, Qr], got {tuple(weight.shape)}")
    r = 2 * freqs.shape[0] if freqs.dim() == 1 else -1
    if r not in (16, 32, 64, 128):
        raise ValueError(f"indexer_q: freqs must be [R/2] with R a power of two in 16..128, got {tuple(freqs.shape)}")
    t = qr.shape[0]
    if positions.dim() != 1 or positions.shape[0] != t:
        raise ValueError(f"indexer_q: positions must be [T={t}], got {tuple(positions.shape)}")
    return r, check_device(qr, weight, weight_scale, positions, freqs)


# The kernel structure is part of the `triton` config space (PATH): "fused" the kernel above (the GEMM with the
# epilogue in its last tiles), "split" the `triton_v1` code (fp8_linear, then _indexer_q_epilogue at EPI_WARPS). A
# tuned entry picks it per (T, Hi, Qr); without one, FUSED_MIN_T / FUSED_MIN_HI decide. H200, 2026-12-01, same run
# (second mid-session call, `kernelbench tune indexer_q ...` trials, us split / fused, Qr 1024): Hi 8: T=1 6.74 / 8.52,
# T=16 8.34 / 10.03, T=64 10.60 / 13.07; Hi 64: T=1 8.81 / 13.15, T=16 12.51 / 14.67, T=64 26.27 / 23.38. (The step
# attribution across sessions 3 / 4 had favoured fused from C=16, against a split path whose fp8_linear was the
# three-launch one: data/h200-2026-12-01-session{3,4}/decode_flash.json.)
INDEXER_Q_PATHS = ("fused", "split")
FUSED_MIN_T = 17          # fused only where it won: T = 64 with Hi = 64
FUSED_MIN_HI = 9
EPILOGUE_WARPS = (1, 2, 4)


def indexer_q_configs(params: dict) -> list[dict]:
    from kernelbench.kernels import linear as KL
    k = params.get("Qr", params.get("K", 128))
    fused = [{**c, "RB": 16, "PATH": "fused", "EPI_WARPS": 2}
             for c in KL.fp8_configs({"K": k}) if DI % c["BN"] == 0]
    fused += [{**c, "PREFETCH": "staged"} for c in fused if c["num_stages"] == 3]      # scales a step ahead
    base = _fused_default(params)
    gemv = [base] if base["BM"] == 1 else []           # one token: the default's GEMV tile (fp8_configs has no BM 1)
    if gemv:   # and the GEMV shape that won in the step at one token four times (session 23: NB 1, the widest split,
        gemv.append({**base, "NB": 1, "SPLIT": max(1, k // 128), "num_warps": 4})              # 4 warps), one launch
    from kernelbench.kernels.front import head_sum_configs
    return (fused + head_sum_configs(gemv) + [{**base, "PATH": "split", "EPI_WARPS": w} for w in EPILOGUE_WARPS]
            + [{**base, "PATH": "split", "EPI": "rows", "EPI_WARPS": 4}])


def _fused_default(params: dict) -> dict:
    from kernelbench.kernels.front import _epilogue_default
    m, k = params.get("T", params.get("M", 1)), params.get("Qr", params.get("K", 1024))
    return {**_epilogue_default(m, params.get("Hi", 8) * DI, k), "RB": 16, "PATH": "fused", "EPI_WARPS": 2}


def indexer_q_default(params: dict) -> dict:
    """PATH "fused" at T >= FUSED_MIN_T with Hi >= FUSED_MIN_HI, else PATH "split"; both with front.py's epilogue tile
    for the fused kernel and EPI_WARPS 2 for the split path's epilogue launch (a pinned PATH alone runs that path).
    One token stays "split": the fused BM 1 GEMV (the epilogue in each head's last tile) took 11.55-15.70 us against
    8.74 (Hi 64, Qr 1024) and the step 0.026 ms more (H200, session 13, data/h200-2026-12-02-session13/call1)."""
    base = _fused_default(params)
    fused = params.get("T", params.get("M", 1)) >= FUSED_MIN_T and params.get("Hi", 8) >= FUSED_MIN_HI
    return base if fused else {**base, "PATH": "split"}


@register_impl("indexer_q", "triton", backend="triton", configs=indexer_q_configs, default_config=indexer_q_default,
               kernels=lambda: [_indexer_q_kernel, _indexer_q_epilogue, _indexer_q_epilogue_rows],
               options=frozenset({"XQ"}))
def indexer_q(qr: torch.Tensor, weight: torch.Tensor, weight_scale: torch.Tensor, positions: torch.Tensor,
              freqs: torch.Tensor, config: dict | None = None) -> torch.Tensor:
    """qr [T, Qr] bf16 -> qi [T, Hi, 128] bf16. PATH "fused": fp8 GEMM with RoPE + Hadamard + FP4 in its epilogue,
    one launch (two above PROLOGUE_QUANT_MAX_M rows: the activation quantization pre-pass). PATH "split": fp8_linear,
    then the epilogue kernel (_indexer_q_split, the triton_v1 code)."""
    from kernelbench.kernels import linear as KL
    from kernelbench.kernels.front import _gemm_activation, _gemm_split, refuse_fused_options
    r, dev = _check_indexer_q(qr, weight, weight_scale, positions, freqs)
    check_dtype("qr", qr, torch.bfloat16)
    check_dtype("weight", weight, torch.float8_e4m3fn)
    check_dtype("weight_scale", weight_scale, torch.float8_e8m0fnu)
    M, K = qr.shape
    N = weight.shape[0]
    if weight.shape[1] != K or K % 128:
        raise ValueError(f"indexer_q: qr [T, Qr] and weight [Hi*128, Qr] with Qr % 128 == 0 expected, got "
                         f"{tuple(qr.shape)} and {tuple(weight.shape)}")
    check_shape("weight_scale", weight_scale, (N // 128, K // 128))
    hl = N // DI
    key = {"T": M, "Hi": hl, "Qr": K}
    cfg = config or lookup("indexer_q", key, indexer_q_default(key))
    path = cfg.get("PATH", "fused")
    if path not in INDEXER_Q_PATHS:
        raise ValueError(f"indexer_q: PATH={path!r} must be one of {', '.join(INDEXER_Q_PATHS)}")
    if path == "split":
        refuse_fused_options(cfg, "indexer_q", "fp8_linear, then the epilogue launch")
        return _indexer_q_split(qr, weight, weight_scale, positions, freqs, r, dev, cfg.get("EPI_WARPS", 2),
                                cfg.get("EPI", "row"))
    if DI % cfg["BN"]:
        raise ValueError(f"indexer_q: BN={cfg['BN']} must divide 128")
    out = torch.empty(M, hl, DI, dtype=torch.bfloat16, device=dev)
    if M == 0:
        return out
    xin, sx, quant_in_gemm = _gemm_activation(qr, M, out, cfg, "indexer_q")
    split, nb = _gemm_split(cfg, K, quant_in_gemm, "indexer_q")
    bm, bn = cfg["BM"], cfg["BN"]
    grid = (N // bn, split, triton.cdiv(M, bm))
    part = out if split == 1 else torch.empty((split, M, N), dtype=torch.float32, device=dev)
    tickets = KL.split_tickets(dev, grid[0] * grid[2] + grid[2] * hl)
    _indexer_q_kernel[grid](
        xin, sx, weight.contiguous(), weight_scale.contiguous().view(torch.uint8), out, part, tickets,
        positions.contiguous(), freqs.contiguous(), M, N, K, xin.stride(0), hl, R=r, KB_SPLIT=K // 128 // split,
        BM=bm, BN=bn, SPLIT=split, RB=max(16, cfg.get("RB", 16)), QUANT=quant_in_gemm, HW_CVT=not INTERPRET,
        RNE_FIX=INTERPRET, DOT_UPCAST=INTERPRET, NB=nb, HEAD_SUM=KL.head_sum_option(cfg, "indexer_q"),
        STAGED=KL.prefetch_staged(cfg, "indexer_q"), PROMOTE=fp8_promote(), num_warps=cfg["num_warps"], num_stages=cfg["num_stages"],
        **pdl_args(dev, M, weight))
    return out


@triton.jit
def _indexer_q_epilogue(q_ptr, pos_ptr, f_ptr, out_ptr, HI,            # q, out (T, Hi, 128) bf16 contiguous
                        R: tl.constexpr, RNE_FIX: tl.constexpr, PDL: tl.constexpr = False):
    """Program (t * Hi + h): RoPE on the last R dims, Hadamard, FP4 simulation (group 32), each step
    rounded to bf16 as the reference does; `out` is the scratch between steps (barriers between)."""
    pdl_enter(PDL)                                    # no weights: the wait first
    row = tl.program_id(0)
    t = row // HI
    src = q_ptr + row.to(tl.int64) * 128
    dst = out_ptr + row.to(tl.int64) * 128
    d = tl.arange(0, 128)
    x = tl.load(src + d)
    tl.store(dst + d, x, mask=d < 128 - R)
    i = tl.arange(0, R // 2)
    ev = 128 - R + 2 * i
    xe = tl.load(src + ev).to(tl.float32)
    xo = tl.load(src + ev + 1).to(tl.float32)
    sn, cs = sincos(tl.load(pos_ptr + t).to(tl.float32) * tl.load(f_ptr + i))
    tl.store(dst + ev, to_bf16(xe * cs - xo * sn, RNE_FIX))
    tl.store(dst + ev + 1, to_bf16(xe * sn + xo * cs, RNE_FIX))
    tl.debug_barrier()
    yh = hadamard128(tl.load(dst + d).to(tl.float32), d, RNE_FIX)
    tl.debug_barrier()
    tl.store(dst + d, yh)
    tl.debug_barrier()
    offs = tl.arange(0, 4)[:, None] * 32 + tl.arange(0, 32)[None, :]
    yq = fp4_simulate_rows(tl.load(dst + offs).to(tl.float32))
    tl.debug_barrier()
    tl.store(dst + offs, yq)


@register_impl("indexer_q", "triton_v1", backend="triton",
               configs=lambda p: [{"num_warps": w} for w in (1, 2, 4)],
               default_config=lambda p: {"num_warps": 2}, kernels=lambda: [_indexer_q_epilogue])
def indexer_q_v1(qr: torch.Tensor, weight: torch.Tensor, weight_scale: torch.Tensor, positions: torch.Tensor,
                 freqs: torch.Tensor, config: dict | None = None) -> torch.Tensor:
    """The first version (kept to measure against): the Triton fp8 GEMM (fp8_linear), then RoPE + Hadamard + FP4 in
    one more launch."""
    r, dev = _check_indexer_q(qr, weight, weight_scale, positions, freqs)
    cfg = config or {"num_warps": 2}
    return _indexer_q_split(qr, weight, weight_scale, positions, freqs, r, dev, cfg["num_warps"])


EPILOGUES = ("row", "rows")


def _indexer_q_split(qr, weight, weight_scale, positions, freqs, r: int, dev, num_warps: int,
                     epilogue: str = "row") -> torch.Tensor:
    """fp8_linear (its own tuned config), then the epilogue launch with num_warps: two launches. Epilogue (config EPI)
    "row": _indexer_q_epilogue, one program per (token, head) row, its steps through memory; "rows":
    _indexer_q_epilogue_rows, RB_EPI rows per program in registers (the fused kernel's tail)."""
    from kernelbench.kernels.linear import fp8_linear
    if epilogue not in EPILOGUES:
        raise ValueError(f"indexer_q: config EPI={epilogue!r} must be one of {', '.join(EPILOGUES)}")
    t = qr.shape[0]
    hi = weight.shape[0] // DI
    q = fp8_linear(qr, weight, weight_scale).contiguous()               # (T, Hi*128) bf16
    out = torch.empty(t, hi, DI, dtype=torch.bfloat16, device=dev)
    if t and epilogue == "rows":
        _indexer_q_epilogue_rows[(triton.cdiv(t * hi, RB_EPI),)](
            q, positions.contiguous(), freqs.contiguous(), out, t * hi, hi, R=r, RB=RB_EPI, RNE_FIX=INTERPRET,
            DOT_UPCAST=INTERPRET, num_warps=num_warps, num_stages=1, **pdl_args(dev, t))
    elif t:
        _indexer_q_epilogue[(t * hi,)](q, positions.contiguous(), freqs.contiguous(), out, hi, R=r,
                                       RNE_FIX=INTERPRET, num_warps=num_warps, num_stages=1, **pdl_args(dev, t))
    return out


RB_EPI = 16          # rows per program of the "rows" epilogue (the Hadamard's tl.dot needs at least 16)


@triton.jit
def _indexer_q_epilogue_rows(q_ptr, pos_ptr, f_ptr, out_ptr, ROWS, HI,      # q, out (T, Hi, 128) bf16 contiguous
                             R: tl.constexpr, RB: tl.constexpr, RNE_FIX: tl.constexpr, DOT_UPCAST: tl.constexpr,
                             PDL: tl.constexpr = False):
    """Program p: rows p*RB .. p*RB + RB - 1 of the ROWS = T * Hi (token, head) rows, in registers: RoPE on the last R
    dims (rope_rows), Hadamard on tensor cores and the FP4 simulation (hadamard_fp4_rows), each step rounded to bf16
    as the reference does; one load and one store per row (the fused kernel's tail, _indexer_q_kernel)."""
    pdl_enter(PDL)                                    # no weights: the wait first
    rows = tl.program_id(0) * RB + tl.arange(0, RB)
    rm = rows < ROWS
    d = tl.arange(0, 128)
    offs = rows[:, None].to(tl.int64) * 128 + d[None, :]
    q = tl.load(q_ptr + offs, mask=rm[:, None], other=0.0).to(tl.float32)
    ang = tl.load(pos_ptr + rows // HI, mask=rm, other=0).to(tl.float32)
    q = rope_rows(q, ang, f_ptr, 128, R, RNE_FIX)
    tl.store(out_ptr + offs, hadamard_fp4_rows(q, RNE_FIX, DOT_UPCAST), mask=rm[:, None])


# fp4_pack_keys: the decoder's FP4 key cache write (reference/indexer.py fp4_pack_keys) ------------------------------
@triton.jit
def store_fp4_keys(x, c_ptr, e_ptr, c_off, e_off, rmask, GROUP: tl.constexpr):
    """Keys x (RB, DI) fp32 (FP4-simulated entries: exact) in the FP4 form by act_quant_fp4's rule (`fp4_quant_pairs`):
    row r's DI / 2 code bytes (byte j: dims 2j in the low nibble, 2j + 1 in the high) at c_ptr + c_off[r], its DI /
    GROUP exponent bytes (UE8M0) at e_ptr + e_off[r], where rmask[r]. The writer of `fp4_pack_keys` and of
    compressor_step's key outputs."""
    RB: tl.constexpr = x.shape[0]
    DIM: tl.constexpr = x.shape[1]
    NG: tl.constexpr = RB * (DIM // GROUP)
    xe, xo = tl.split(tl.reshape(x, [NG, GROUP // 2, 2]))
    ce, co, se = fp4_quant_pairs(xe, xo)
    j = tl.arange(0, DIM // 2)
    tl.store(c_ptr + c_off[:, None] + j[None, :], tl.reshape((ce | (co << 4)).to(tl.uint8), [RB, DIM // 2]),
             mask=rmask[:, None])
    g = tl.arange(0, DIM // GROUP)
    tl.store(e_ptr + e_off[:, None] + g[None, :], tl.reshape((se + 127).to(tl.uint8), [RB, DIM // GROUP]),
             mask=rmask[:, None])


@triton.jit
def _fp4_pack_kernel(st_ptr, pos_ptr, seq_ptr, c_ptr, e_ptr, em_ptr, RATIO, s_sb, s_cb, s_cn, s_eb, s_en,
                     DI: tl.constexpr, GROUP: tl.constexpr, PDL: tl.constexpr = False):
    """Grid (T,): token t writes emitted[t]; an emitting token packs its sequence's staged row by act_quant_fp4's
    rule (kernels/quant.py fp4_quant_pairs) into codes / exponents [seq, p // RATIO]."""
    pdl_enter(PDL)
    t = tl.program_id(0)
    p, emits = token_emits(pos_ptr, em_ptr, t, RATIO)
    if emits:
        sq = tl.load(seq_ptr + t).to(tl.int64)
        slot = (p // RATIO).to(tl.int64)
        x = tl.load(st_ptr + sq * s_sb + tl.arange(0, DI)).to(tl.float32)
        store_fp4_keys(tl.reshape(x, [1, DI]), c_ptr, e_ptr, tl.full([1], 0, tl.int64) + sq * s_cb + slot * s_cn,
                       tl.full([1], 0, tl.int64) + sq * s_eb + slot * s_en, tl.full([1], 1, tl.int1), GROUP)


@register_impl("fp4_pack_keys", "triton", backend="triton", configs=lambda p: [{}], default_config=lambda p: {},
               kernels=lambda: [_fp4_pack_kernel])
def fp4_pack_keys(staged: torch.Tensor, positions: torch.Tensor, seq_ids: torch.Tensor, ratio: int,
                  codes: torch.Tensor, exps: torch.Tensor, config: dict | None = None) -> torch.Tensor:
    """One launch, a program a token (contract: reference/indexer.py fp4_pack_keys). Positions past the capacity are
    the caller's bug (no host read of device data: graph-capturable)."""
    check_dtype("fp4_pack_keys: staged", staged, torch.bfloat16)
    if staged.dim() != 2 or staged.shape[1] != DI or staged.stride(1) != 1:
        raise ValueError(f"fp4_pack_keys: staged must be [B, {DI}], contiguous in its rows, got {tuple(staged.shape)}")
    check_fp4_keys(codes, exps, "fp4_pack_keys", ("codes", "exps"))
    if codes.shape[0] != staged.shape[0]:
        raise ValueError(f"fp4_pack_keys: staged has {staged.shape[0]} sequence slots, the cache {codes.shape[0]}")
    t = positions.shape[0]
    if positions.dim() != 1 or seq_ids.shape != (t,) or positions.dtype.is_floating_point \
            or seq_ids.dtype.is_floating_point:
        raise ValueError(f"fp4_pack_keys: positions and seq_ids must be integer [T], got {tuple(positions.shape)} "
                         f"{positions.dtype} and {tuple(seq_ids.shape)} {seq_ids.dtype}")
    if isinstance(ratio, bool) or not isinstance(ratio, int) or ratio <= 0:
        raise ValueError(f"fp4_pack_keys: ratio must be a positive int, got {ratio!r}")
    if codes.stride(2) != 1 or exps.stride(2) != 1:
        raise ValueError("fp4_pack_keys: codes and exps must be contiguous in their last dim")
    dev = check_device(staged, positions, seq_ids, codes, exps)
    emitted = torch.empty(t, dtype=torch.bool, device=dev)
    if t:
        _fp4_pack_kernel[(t,)](staged, positions.contiguous(), seq_ids.contiguous(), codes, exps,
                               emitted.view(torch.uint8), ratio, staged.stride(0), codes.stride(0), codes.stride(1),
                               exps.stride(0), exps.stride(1), DI=DI, GROUP=KEY_GROUP, num_warps=1,
                               **pdl_args(dev, t))
    return emitted
