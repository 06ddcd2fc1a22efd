"""compressor_step fused (SPEC 3.4, reference/compressor.py): the decode step of the KV compressor.

Legend: T tokens, B sequences, D hidden, d entry width (DD: 512 attention / 128 indexer), c = 2 for
r = 4 (overlap) else 1, N = c*d projection width, r ratio, R rope dims, RB state rows per step.
State layout (reference/compressor.py): state_kv / state_score [B, c*r, c*d] fp32; token p goes to
row (r if c == 2 else 0) + p % r.

Impl "triton": ONE launch, `_comp_step` grid (N / BN, T / BM, SPLIT), graph-capturable (tickets in the
per-device buffer of kernels/linear.py split_tickets, reset by the kernel; which tokens emit is decided on
the device):
  1. every program multiplies x [T, D] by its K chunk of wkv and wgate (tensor cores) and stores fp32
     partials; the tile's last program to take its ticket sums them in split order 0..S-1 (deterministic),
     adds ape[p % r] to the scores and stores both into the tokens' state rows. Programs (0, m, 0) write
     emitted[t] = (p+1) % r == 0.
  2. if a token of the row block emits, the finished tile pools its channel block (BN channels) for each
     emitting token: online softmax over the c*r rows, ROWS at a time -> bf16, stored in the cache row as
     scratch. Overlap (c = 2): channel block j needs both halves (columns j and d + j), so the second of the
     two half-tiles to arrive (a pair ticket) pools, then moves rows [r, 2r) of both column blocks to [0, r).
  3. the last of the row block's d / BN channel blocks to arrive (a row-block ticket) finishes its emitting
     tokens RB rows at a time in registers: RMS norm, RoPE at p + 1 - r, FP8 simulation of the first d - R
     dims (group 64) or Hadamard ([RB, 128] x [128, 128] +-1 on tensor cores) + FP4 (group 32).
  The ratio-128 pooling (128 rows x 512 channels) is spread over d / BN programs instead of one.

Config key PATH of impl "triton": "one" (the above) or "split" (the code of impl "triton_v2", below); the default
takes "one" at ratio >= 8 only (step_default), a tuned entry per (T, D, d, ratio).

Impl "triton_v2" (the previous version, kept to measure against): two or three launches:
  1. `_comp_project` grid (N / BN, T / BM, SPLIT): x [T, D] against wkv and wgate [N, D] on tensor cores
     (the weights are read once for the whole batch). At decode sizes N / BN x T / BM is 4-16 programs
     (each walking all of D: ~10% of copy bandwidth on the H200), so D is split over SPLIT programs
     (SPLIT from the SM count: about 2 programs per SM). SPLIT = 1: + ape[p % r], the epilogue scatters
     both rows into the token's state slot. SPLIT > 1: fp32 partials to a workspace [SPLIT, T, 2, N];
  1b. `_comp_reduce` grid (T, N / BLOCK_R) (SPLIT > 1 only): sums the SPLIT partials in a fixed order
     (deterministic, no atomics), + ape[p % r], scatters into the state slot.
  2. `_comp_emit` grid (T,): writes emitted[t] = (p+1) % r == 0 (no torch ops on the side); tokens that
     do not emit return at once. An emitting token pools its
     2r (overlap) or r rows per channel with an online softmax over row blocks, rounds to bf16, RMS
     norm, RoPE at p + 1 - r, then FP8 simulation of the first d - R dims (attention) or Hadamard +
     FP4 simulation (indexer), written to cache[seq, p // r]. REG: those steps stay in
     registers ((even, odd) pairs by reshape/split for RoPE, groups by reshape) and the row is stored
     once; without REG (triton_v1) the cache slot is the scratch between the steps (store, barrier,
     reload: one L2 round trip each). Same roundings, bit-identical results. With overlap it then moves
     rows [r, 2r) to [0, r).
Impl "triton_v1": triton_v2 without the D split, 8 rows per pooling step, the memory-scratch emit.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernelbench.kernels.attention import sm_count  # noqa: F401  (applies the interpreter loop fix)
from kernelbench.kernels.common import (INTERPRET, check_device, dot_operand, hadamard128, l2_prefetch_rows, pdl_args,
                                       pdl_enter, sincos, to_bf16, token_emits)
from kernelbench.kernels.indexer import hadamard_fp4_rows, rope_rows, store_fp4_keys
from kernelbench.kernels.quant import e4m3_round_code, fp4_simulate_rows, pow2, ue8m0_exp
from kernelbench.reference.compressor import check_key_outputs, check_weights
from kernelbench.registry import register_impl
from kernelbench.tuned_configs import lookup


SPLIT_AUTO = "auto"   # SPLIT from the SM count (a string: tuned-config values are positive integers or names)


def compressor_configs(params: dict, rows=(8, 16)) -> list[dict]:
    """Projection tile (BLOCK_M follows T: 16 up to 16 tokens, else 32), state rows per pooling step, and
    SPLIT: programs over D ("auto": from the SM count, about `waves` programs per SM in all; 1: no split)."""
    return [{"BLOCK_N": bn, "BLOCK_K": bk, "num_warps": 4, "num_stages": 3, "ROWS": rb, "SPLIT": sp, "waves": 2}
            for bn in (32, 64) for bk in (64, 128) for rb in rows for sp in (SPLIT_AUTO, 1)]


def compressor_default(params: dict) -> dict:
    """ROWS 16: an emitting ratio-128 token pools 128 state rows in a serial loop (one L2/HBM round trip
    per step, ~1.4 us each at ROWS 8 on the H200: 35 us for the whole step at T=1), so fewer, wider steps."""
    return {"BLOCK_N": 64, "BLOCK_K": 128, "num_warps": 4, "num_stages": 3, "ROWS": 16, "SPLIT": SPLIT_AUTO,
            "waves": 2}


MAX_SPLIT = 32


def split_plan(d: int, tiles: int, cfg: dict, sms: int) -> tuple[int, int]:
    """-> (SPLIT, KCHUNK): the D columns per split program are whole BLOCK_K steps; SPLIT "auto" (or 0) in cfg picks
    about cfg["waves"] x sms programs over the `tiles` output tiles (at most MAX_SPLIT, at least 1)."""
    bk = cfg["BLOCK_K"]
    steps = triton.cdiv(d, bk)
    sp = cfg.get("SPLIT", SPLIT_AUTO)
    want = sp if isinstance(sp, int) and sp > 0 else triton.cdiv(cfg.get("waves", 2) * sms, tiles)
    split = max(1, min(int(want), steps, MAX_SPLIT))
    kchunk = triton.cdiv(steps, split) * bk
    return triton.cdiv(d, kchunk), kchunk


@triton.jit
def _comp_project(x_ptr, wkv_ptr, wg_ptr, ape_ptr, pos_ptr, seq_ptr, sk_ptr, ss_ptr, ws_ptr,   # x (T, D) bf16
                  T, D, N, RATIO, OFF, s_sb, s_sr, KCHUNK,         # w (N, D); state (B, c*r, N) fp32
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, SPLIT: tl.constexpr,
                  DOT_UPCAST: tl.constexpr):
    """SPLIT > 1: program (., ., j) reduces columns [j * KCHUNK, (j + 1) * KCHUNK) of D and writes its fp32
    partials to ws (SPLIT, T, 2, N); SPLIT == 1: the whole of D, then the epilogue into the state."""
    offs_n = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_m = tl.program_id(1) * BLOCK_M + tl.arange(0, BLOCK_M)
    k_lo = tl.program_id(2) * KCHUNK
    k_hi = tl.minimum(k_lo + KCHUNK, D)
    mm = offs_m < T
    nm = offs_n < N
    acc_k = tl.zeros([BLOCK_M, BLOCK_N], tl.float32)
    acc_g = tl.zeros([BLOCK_M, BLOCK_N], tl.float32)
    for k0 in range(k_lo, k_hi, BLOCK_K):
        offs_k = k0 + tl.arange(0, BLOCK_K)
        km = offs_k < k_hi
        x = dot_operand(tl.load(x_ptr + offs_m[:, None] * D + offs_k[None, :], mask=mm[:, None] & km[None, :],
                                other=0.0), DOT_UPCAST)
        wk = tl.load(wkv_ptr + offs_n[:, None] * D + offs_k[None, :], mask=nm[:, None] & km[None, :], other=0.0)
        wg = tl.load(wg_ptr + offs_n[:, None] * D + offs_k[None, :], mask=nm[:, None] & km[None, :], other=0.0)
        acc_k = tl.dot(x, tl.trans(dot_operand(wk, DOT_UPCAST)), acc_k)
        acc_g = tl.dot(x, tl.trans(dot_operand(wg, DOT_UPCAST)), acc_g)
    m2 = mm[:, None] & nm[None, :]
    if SPLIT == 1:
        pos = tl.load(pos_ptr + offs_m, mask=mm, other=0)
        seq = tl.load(seq_ptr + offs_m, mask=mm, other=0).to(tl.int64)
        ph = pos % RATIO
        acc_g += tl.load(ape_ptr + ph[:, None] * N + offs_n[None, :], mask=m2, other=0.0)
        row = seq[:, None] * s_sb + (OFF + ph)[:, None] * s_sr + offs_n[None, :]
        tl.store(sk_ptr + row, acc_k, mask=m2)
        tl.store(ss_ptr + row, acc_g, mask=m2)
    else:
        wrow = (tl.program_id(2) * T + offs_m).to(tl.int64) * (2 * N)
        tl.store(ws_ptr + wrow[:, None] + offs_n[None, :], acc_k, mask=m2)
        tl.store(ws_ptr + wrow[:, None] + N + offs_n[None, :], acc_g, mask=m2)


@triton.jit
def _comp_reduce(ws_ptr, ape_ptr, pos_ptr, seq_ptr, sk_ptr, ss_ptr,   # ws (SPLIT, T, 2, N) fp32 partials
                 T, N, RATIO, OFF, s_sb, s_sr,
                 SPLIT: tl.constexpr, SPLIT_P2: tl.constexpr, BLOCK_R: tl.constexpr):
    """Program (t, b): the SPLIT partials of columns [b * BLOCK_R, ...) of token t summed (one fixed-order
    reduction: deterministic), + ape on the score half, stored into the token's state slot."""
    t = tl.program_id(0)
    offs_n = tl.program_id(1) * BLOCK_R + tl.arange(0, BLOCK_R)
    sp = tl.arange(0, SPLIT_P2)
    nm = offs_n < N
    m2 = (sp < SPLIT)[:, None] & nm[None, :]
    src = ws_ptr + (sp * T + t).to(tl.int64)[:, None] * (2 * N) + offs_n[None, :]
    kv = tl.sum(tl.load(src, mask=m2, other=0.0), axis=0)
    sc = tl.sum(tl.load(src + N, mask=m2, other=0.0), axis=0)
    ph = tl.load(pos_ptr + t) % RATIO
    seq = tl.load(seq_ptr + t).to(tl.int64)
    sc += tl.load(ape_ptr + ph * N + offs_n, mask=nm, other=0.0)
    row = seq * s_sb + (OFF + ph) * s_sr + offs_n
    tl.store(sk_ptr + row, kv, mask=nm)
    tl.store(ss_ptr + row, sc, mask=nm)


@triton.jit
def _comp_emit(sk_ptr, ss_ptr, pos_ptr, seq_ptr, nw_ptr, f_ptr, cache_ptr, em_ptr,   # cache (B, Ncap, DD) bf16
               eps, RATIO, s_sb, s_sr, s_cb, s_cn,
               DD: tl.constexpr, C: tl.constexpr, R: tl.constexpr, ROWS: tl.constexpr, ROTATE: tl.constexpr,
               NG_P2: tl.constexpr, RNE_FIX: tl.constexpr, REG: tl.constexpr = False,
               KEY_FP4: tl.constexpr = False, kc_ptr=None, ke_ptr=None, s_kcb=0, s_kcn=0, s_keb=0, s_ken=0):
    # KEY_FP4: the emitted entry also in the FP4 key form (compressor_step's key_codes / key_exps; `store_fp4_keys`)
    t = tl.program_id(0)
    p, emits = token_emits(pos_ptr, em_ptr, t, RATIO)
    if emits:
        seq = tl.load(seq_ptr + t).to(tl.int64)
        ch = tl.arange(0, DD)
        m_i = tl.full([DD], float("-inf"), tl.float32)
        l_i = tl.zeros([DD], tl.float32)
        acc = tl.zeros([DD], tl.float32)
        for r0 in range(0, C * RATIO, ROWS):                            # online softmax over the pooled rows
            rows = r0 + tl.arange(0, ROWS)
            rm = (rows < C * RATIO)[:, None]
            col = tl.where(rows >= RATIO, DD, 0) * (C - 1)               # overlap: current rows use [d, 2d)
            off = seq * s_sb + rows[:, None] * s_sr + col[:, None] + ch[None, :]
            kv = tl.load(sk_ptr + off, mask=rm, other=0.0)
            sc = tl.load(ss_ptr + off, mask=rm, other=float("-inf"))
            m_new = tl.maximum(m_i, tl.max(sc, axis=0))
            m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
            alpha = tl.exp(m_i - m_safe)
            e = tl.exp(sc - m_safe[None, :])
            l_i = l_i * alpha + tl.sum(e, axis=0)
            acc = acc * alpha + tl.sum(e * kv, axis=0)
            m_i = m_new
        y = to_bf16(acc / l_i, RNE_FIX).to(tl.float32)                  # the pooled entry in bf16
        rs = 1.0 / tl.sqrt(tl.sum(y * y, axis=0) / DD + eps)
        y = to_bf16((y * rs) * tl.load(nw_ptr + ch).to(tl.float32), RNE_FIX)
        dst = cache_ptr + seq * s_cb + (p // RATIO) * s_cn
        kc_off = tl.full([1], 0, tl.int64) + seq * s_kcb + (p // RATIO) * s_kcn
        ke_off = tl.full([1], 0, tl.int64) + seq * s_keb + (p // RATIO) * s_ken
        if REG:
            _emit_finish_regs(y.to(tl.float32), dst, p, RATIO, f_ptr, DD, R, ROTATE, RNE_FIX, KEY_FP4, kc_ptr, ke_ptr,
                              kc_off, ke_off)
        else:
            tl.store(dst + ch, y)
            tl.debug_barrier()
            i = tl.arange(0, R // 2)                                        # RoPE at the block start
            ev = DD - R + 2 * i
            xe = tl.load(dst + ev).to(tl.float32)
            xo = tl.load(dst + ev + 1).to(tl.float32)
            sn, cs = sincos((p + 1 - RATIO).to(tl.float32) * tl.load(f_ptr + i))
            tl.debug_barrier()
            tl.store(dst + ev, to_bf16(xe * cs - xo * sn, RNE_FIX))
            tl.store(dst + ev + 1, to_bf16(xe * sn + xo * cs, RNE_FIX))
            tl.debug_barrier()
            if ROTATE:                                                      # Hadamard, then FP4 (group 32)
                yh = hadamard128(tl.load(dst + ch).to(tl.float32), ch, RNE_FIX)
                tl.debug_barrier()
                tl.store(dst + ch, yh)
                tl.debug_barrier()
                g = tl.arange(0, DD // 32)
                offs = g[:, None] * 32 + tl.arange(0, 32)[None, :]
                yq = fp4_simulate_rows(tl.load(dst + offs).to(tl.float32))
                tl.debug_barrier()
                tl.store(dst + offs, yq)
                if KEY_FP4:
                    store_fp4_keys(tl.reshape(yq.to(tl.float32), [1, DD]), kc_ptr, ke_ptr, kc_off, ke_off,
                                   tl.full([1], 1, tl.int1), 32)
            else:                                                           # FP8 (group 64) of the first d - R
                g = tl.arange(0, NG_P2)
                offs = g[:, None] * 64 + tl.arange(0, 64)[None, :]
                gm = (g < (DD - R) // 64)[:, None]
                xq = tl.load(dst + offs, mask=gm, other=0.0).to(tl.float32)
                amax = tl.maximum(tl.max(tl.abs(xq), axis=1), 1e-4)
                se = ue8m0_exp(amax, 8, 0x600000)                           # 448 = 1.75 * 2^8
                _, val = e4m3_round_code(tl.minimum(tl.maximum(xq * pow2(-se)[:, None], -448.0), 448.0))
                tl.debug_barrier()
                tl.store(dst + offs, (val * pow2(se)[:, None]).to(tl.bfloat16), mask=gm)
        if C == 2:                                                      # current block becomes "previous"
            tl.debug_barrier()
            for r0 in range(0, RATIO, ROWS):
                rows = r0 + tl.arange(0, ROWS)
                rm = (rows < RATIO)[:, None]
                for c0 in tl.static_range(0, 2 * DD, DD):
                    src = seq * s_sb + (rows + RATIO)[:, None] * s_sr + c0 + ch[None, :]
                    dst_row = seq * s_sb + rows[:, None] * s_sr + c0 + ch[None, :]
                    kv = tl.load(sk_ptr + src, mask=rm)
                    sc = tl.load(ss_ptr + src, mask=rm)
                    tl.store(sk_ptr + dst_row, kv, mask=rm)
                    tl.store(ss_ptr + dst_row, sc, mask=rm)


@triton.jit
def _emit_finish_regs(y, dst, p, RATIO, f_ptr, DD: tl.constexpr, R: tl.constexpr, ROTATE: tl.constexpr,
                      RNE_FIX: tl.constexpr, KEY_FP4: tl.constexpr = False, kc_ptr=None, ke_ptr=None, kc_off=None,
                      ke_off=None):
    """The emitted entry after its norm (y: [DD] fp32 holding bf16 values) to the cache row `dst`, kept in
    registers (REG): RoPE on the last R dims as (even, odd) pairs, then Hadamard + FP4 (ROTATE) or FP8 of
    the first DD - R dims, each step rounded as the memory path rounds; one store."""
    ye, yo = tl.split(tl.reshape(y, [DD // 2, 2]))
    i = tl.arange(0, DD // 2)
    rot = i >= (DD - R) // 2
    sn, cs = sincos((p + 1 - RATIO).to(tl.float32) * tl.load(f_ptr + i - (DD - R) // 2, mask=rot, other=0.0))
    ne = tl.where(rot, to_bf16(ye * cs - yo * sn, RNE_FIX).to(tl.float32), ye)
    no = tl.where(rot, to_bf16(ye * sn + yo * cs, RNE_FIX).to(tl.float32), yo)
    y = tl.reshape(tl.join(ne, no), [DD])
    ch = tl.arange(0, DD)
    if ROTATE:                                                          # Hadamard, then FP4 (group 32)
        yh = hadamard128(y, ch, RNE_FIX).to(tl.float32)
        out = fp4_simulate_rows(tl.reshape(yh, [DD // 32, 32])).to(tl.float32)
        if KEY_FP4:
            store_fp4_keys(tl.reshape(out, [1, DD]), kc_ptr, ke_ptr, kc_off, ke_off, tl.full([1], 1, tl.int1), 32)
    else:                                                               # FP8 (group 64) of the first d - R
        xq = tl.reshape(y, [DD // 64, 64])
        gm = (tl.arange(0, DD // 64) < (DD - R) // 64)[:, None]
        amax = tl.maximum(tl.max(tl.abs(xq), axis=1), 1e-4)
        se = ue8m0_exp(amax, 8, 0x600000)                               # 448 = 1.75 * 2^8
        _, val = e4m3_round_code(tl.minimum(tl.maximum(xq * pow2(-se)[:, None], -448.0), 448.0))
        out = tl.where(gm, val * pow2(se)[:, None], xq)
    tl.store(dst + ch, tl.reshape(out, [DD]).to(tl.bfloat16))


def _key_args(key_codes, key_exps, cache, rotate) -> dict:
    """compressor_step's optional FP4 key outputs (reference/compressor.py check_key_outputs) as the emit kernels'
    arguments: {} without them."""
    if not check_key_outputs(key_codes, key_exps, cache, rotate):
        return {}
    if key_codes.stride(2) != 1 or key_exps.stride(2) != 1:
        raise ValueError("compressor_step: key_codes and key_exps must be contiguous in their last dim")
    return dict(KEY_FP4=True, kc_ptr=key_codes, ke_ptr=key_exps, s_kcb=key_codes.stride(0), s_kcn=key_codes.stride(1),
                s_keb=key_exps.stride(0), s_ken=key_exps.stride(1))


def _check_step(x, wkv, wgate, ape, norm_weight, freqs, state_kv, state_score, cache, positions, seq_ids, ratio,
                rotate) -> tuple[int, int]:
    """Shapes, dtypes and layouts every implementation needs -> (c, d). positions/seq_ids values are not checked
    (no host sync)."""
    c, d = check_weights("compressor_step", x, wkv, wgate, ape, norm_weight, freqs, ratio)
    t = x.shape[0]
    b = cache.shape[0]
    if state_kv.shape != (b, c * ratio, c * d) or state_score.shape != state_kv.shape or \
            state_kv.dtype != torch.float32 or state_score.dtype != torch.float32:
        raise ValueError(f"compressor_step: states must be fp32 [B={b}, c*r={c * ratio}, c*d={c * d}], got "
                         f"{tuple(state_kv.shape)} and {tuple(state_score.shape)}")
    if cache.dim() != 3 or cache.shape[2] != d or cache.dtype != torch.bfloat16:
        raise ValueError(f"compressor_step: cache must be bf16 [B, Ncap, d={d}], got {tuple(cache.shape)}")
    if d & (d - 1) or (rotate and d != 128):
        raise ValueError(f"compressor_step: d must be a power of two (128 with rotate), got {d}")
    if positions.shape != (t,) or seq_ids.shape != (t,):
        raise ValueError(f"compressor_step: positions and seq_ids must be [T={t}]")
    if not (state_kv.is_contiguous() and state_score.is_contiguous() and cache.stride(2) == 1):
        raise ValueError("compressor_step: states must be contiguous and cache contiguous in d")
    return c, d


@register_impl("compressor_step", "triton_v2", backend="triton", configs=compressor_configs,
               default_config=compressor_default, kernels=lambda: [_comp_project, _comp_reduce, _comp_emit])
def compressor_step_v2(x, wkv, wgate, ape, norm_weight, eps, positions, seq_ids, freqs, state_kv, state_score, cache,
                       ratio: int, rotate: bool, key_codes=None, key_exps=None,
                       config: dict | None = None) -> torch.Tensor:
    """The second version (kept to measure against): two or three launches (projection, reduce of the D split,
    emit with one program per token). In place on state_kv, state_score and cache (and key_codes / key_exps: the
    emit also writes the FP4 key form); returns emitted [T] bool."""
    c, d = _check_step(x, wkv, wgate, ape, norm_weight, freqs, state_kv, state_score, cache, positions, seq_ids,
                       ratio, rotate)
    t, dim = x.shape
    dev = check_device(x, wkv, wgate, ape, norm_weight, positions, seq_ids, freqs, state_kv, state_score, cache)
    keys = _key_args(key_codes, key_exps, cache, rotate)
    cfg = config or lookup("compressor_step", {"T": t, "D": dim, "d": d, "ratio": ratio}, compressor_default({}))
    pos, seq = positions.contiguous(), seq_ids.contiguous()
    emitted = torch.empty(t, dtype=torch.bool, device=dev)
    if t == 0:
        return emitted
    n = c * d
    bm = 16 if t <= 16 else 32
    tiles = (triton.cdiv(n, cfg["BLOCK_N"]), triton.cdiv(t, bm))
    split, kchunk = split_plan(dim, tiles[0] * tiles[1], cfg, sm_count(dev))
    ws = torch.empty(split, t, 2, n, dtype=torch.float32, device=dev) if split > 1 else state_kv
    ape = ape.contiguous()
    off = ratio if c == 2 else 0
    _comp_project[(*tiles, split)](
        x.contiguous(), wkv.contiguous(), wgate.contiguous(), ape, pos, seq, state_kv, state_score, ws,
        t, dim, n, ratio, off, state_kv.stride(0), state_kv.stride(1), kchunk,
        BLOCK_M=bm, BLOCK_N=cfg["BLOCK_N"], BLOCK_K=cfg["BLOCK_K"], SPLIT=split, DOT_UPCAST=INTERPRET,
        num_warps=cfg["num_warps"], num_stages=cfg["num_stages"])
    if split > 1:
        sp2 = triton.next_power_of_2(split)
        block_r = min(triton.next_power_of_2(n), max(32, 4096 // sp2))   # <= 32 partial values per thread
        _comp_reduce[(t, triton.cdiv(n, block_r))](
            ws, ape, pos, seq, state_kv, state_score, t, n, ratio, off, state_kv.stride(0), state_kv.stride(1),
            SPLIT=split, SPLIT_P2=sp2, BLOCK_R=block_r, num_warps=4, num_stages=1)
    r = 2 * freqs.shape[0]
    _comp_emit[(t,)](state_kv, state_score, pos, seq, norm_weight.contiguous(), freqs.contiguous(), cache,
                     emitted.view(torch.uint8), float(eps), ratio, state_kv.stride(0), state_kv.stride(1),
                     cache.stride(0), cache.stride(1),
                     DD=d, C=c, R=r, ROWS=min(cfg["ROWS"], triton.next_power_of_2(c * ratio)), ROTATE=bool(rotate),
                     NG_P2=triton.next_power_of_2(max(1, (d - r) // 64)), RNE_FIX=INTERPRET,
                     REG=bool(cfg.get("REG_EMIT", True)), num_warps=4, num_stages=1, **keys)
    return emitted


V1 = {"SPLIT": 1, "ROWS": 8, "REG_EMIT": False}   # the first version's projection, pooling step and emit


@register_impl("compressor_step", "triton_v1", backend="triton", configs=compressor_configs,
               default_config=lambda p: {**compressor_default(p), **V1},
               kernels=lambda: [_comp_project, _comp_emit])
def compressor_step_v1(x, wkv, wgate, ape, norm_weight, eps, positions, seq_ids, freqs, state_kv, state_score, cache,
                       ratio: int, rotate: bool, key_codes=None, key_exps=None,
                       config: dict | None = None) -> torch.Tensor:
    """The first version (kept to measure against): no split of D, so N / BLOCK_N x T / BLOCK_M programs, and
    8 state rows per pooling step."""
    cfg = {**(config or compressor_default({})), **V1}
    return compressor_step_v2(x, wkv, wgate, ape, norm_weight, eps, positions, seq_ids, freqs, state_kv, state_score,
                              cache, ratio, rotate, key_codes, key_exps, config=cfg)


# impl "triton": the whole step in one launch ----------------------------------------------------------------------
@triton.jit
def _pool_channels(sk_ptr, ss_ptr, base, cb, s_sr, RATIO, DD: tl.constexpr, C: tl.constexpr, ROWS: tl.constexpr,
                   BN: tl.constexpr, RNE_FIX: tl.constexpr):
    """Channels [cb, cb + BN) of one sequence's pooled entry (state rows at sk/ss + base): per-channel online softmax
    over the C * RATIO rows, ROWS at a time (overlap: rows >= RATIO use columns DD + channel) -> bf16 (BN,).
    Loads bypass L1 (.cg): other programs of the launch wrote the rows."""
    ch = cb + tl.arange(0, BN)
    m_i = tl.full([BN], float("-inf"), tl.float32)
    l_i = tl.zeros([BN], tl.float32)
    acc = tl.zeros([BN], tl.float32)
    for r0 in range(0, C * RATIO, ROWS):
        rows = r0 + tl.arange(0, ROWS)
        rm = (rows < C * RATIO)[:, None]
        col = tl.where(rows >= RATIO, DD, 0) * (C - 1)
        off = base + rows[:, None] * s_sr + col[:, None] + ch[None, :]
        kv = tl.load(sk_ptr + off, mask=rm, other=0.0, cache_modifier=".cg")
        sc = tl.load(ss_ptr + off, mask=rm, other=float("-inf"), cache_modifier=".cg")
        m_new = tl.maximum(m_i, tl.max(sc, axis=0))
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
        alpha = tl.exp(m_i - m_safe)
        e = tl.exp(sc - m_safe[None, :])
        l_i = l_i * alpha + tl.sum(e, axis=0)
        acc = acc * alpha + tl.sum(e * kv, axis=0)
        m_i = m_new
    return to_bf16(acc / l_i, RNE_FIX)


@triton.jit
def _finish_rows(cache_ptr, dst, rmask, ang, nw_ptr, f_ptr, eps, DD: tl.constexpr, R: tl.constexpr,
                 ROTATE: tl.constexpr, RNE_FIX: tl.constexpr, DOT_UPCAST: tl.constexpr, KEY_FP4: tl.constexpr = False,
                 kc_ptr=None, ke_ptr=None, kc_off=None, ke_off=None):
    """The pooled bf16 entries at cache rows dst (RB,) (rmask: which) -> in place: RMS norm (weight), RoPE on the last
    R dims at angles ang (RB,) (position p + 1 - r), then Hadamard + FP4 (ROTATE, DD = 128, RB >= 16) or FP8 of the
    first DD - R dims (group 64); every step rounded to bf16 as the reference (and `_emit_finish_regs`) rounds."""
    RB: tl.constexpr = dst.shape[0]
    d = tl.arange(0, DD)
    ptrs = cache_ptr + dst[:, None] + d[None, :]
    y = tl.load(ptrs, mask=rmask[:, None], other=0.0, cache_modifier=".cg").to(tl.float32)
    rs = 1.0 / tl.sqrt(tl.sum(y * y, axis=1) / DD + eps)
    y = to_bf16((y * rs[:, None]) * tl.load(nw_ptr + d).to(tl.float32)[None, :], RNE_FIX).to(tl.float32)
    y = rope_rows(y, ang, f_ptr, DD, R, RNE_FIX)
    if ROTATE:
        out = hadamard_fp4_rows(y, RNE_FIX, DOT_UPCAST)
        if KEY_FP4:                                                     # also the FP4 key form (kc_off / ke_off)
            store_fp4_keys(out.to(tl.float32), kc_ptr, ke_ptr, kc_off, ke_off, rmask, 32)
    else:
        xq = tl.reshape(y, [RB, DD // 64, 64])
        gm = (tl.arange(0, DD // 64) < (DD - R) // 64)[None, :, None]
        amax = tl.maximum(tl.max(tl.abs(xq), axis=2), 1e-4)
        se = ue8m0_exp(amax, 8, 0x600000)                               # 448 = 1.75 * 2^8
        _, val = e4m3_round_code(tl.minimum(tl.maximum(xq * pow2(-se)[:, :, None], -448.0), 448.0))
        out = tl.reshape(tl.where(gm, val * pow2(se)[:, :, None], xq), [RB, DD]).to(tl.bfloat16)
    tl.store(ptrs, out, mask=rmask[:, None])


@triton.jit
def _comp_step(x_ptr, wkv_ptr, wg_ptr, ape_ptr, pos_ptr, seq_ptr, sk_ptr, ss_ptr, ws_ptr, cnt_ptr,
               nw_ptr, f_ptr, cache_ptr, em_ptr,
               T, D, N, RATIO, OFF, s_sb, s_sr, s_cb, s_cn, KCHUNK, eps,
               DD: tl.constexpr, C: tl.constexpr, R: tl.constexpr,
               BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, SPLIT: tl.constexpr,
               ROWS: tl.constexpr, RB: tl.constexpr, ROTATE: tl.constexpr, DOT_UPCAST: tl.constexpr,
               RNE_FIX: tl.constexpr, EMIT: tl.constexpr = True, PDL: tl.constexpr = False,
               KEY_FP4: tl.constexpr = False, kc_ptr=None, ke_ptr=None, s_kcb=0, s_kcn=0, s_keb=0, s_ken=0):
    # grid (N / BLOCK_N, ceil(T / BLOCK_M), SPLIT); cnt: int32 tickets, zero between launches: one per output tile,
    # then (C == 2) one per (row block, channel block), then one per row block. EMIT False: steps 2-3 are left to
    # `_comp_emit_blocks` (a second launch)
    pid_n, pid_m, pid_s = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    NT = tl.num_programs(0)
    MT = tl.num_programs(1)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    k_lo = pid_s * KCHUNK
    k_hi = tl.minimum(k_lo + KCHUNK, D)
    if PDL:                                 # the program's wkv / wgate span (pdl_args / the wrapper: 16-byte spans)
        if k_hi > k_lo:
            l2_prefetch_rows(wkv_ptr, offs_n, offs_n < N, 2 * D, 2 * k_lo, 2 * (k_hi - k_lo), PDL)
            l2_prefetch_rows(wg_ptr, offs_n, offs_n < N, 2 * D, 2 * k_lo, 2 * (k_hi - k_lo), PDL)
    pdl_enter(PDL)
    mm = offs_m < T
    acc_k = tl.zeros([BLOCK_M, BLOCK_N], tl.float32)
    acc_g = tl.zeros([BLOCK_M, BLOCK_N], tl.float32)
    for k0 in range(k_lo, k_hi, BLOCK_K):
        offs_k = k0 + tl.arange(0, BLOCK_K)
        km = offs_k < k_hi
        x = dot_operand(tl.load(x_ptr + offs_m[:, None] * D + offs_k[None, :], mask=mm[:, None] & km[None, :],
                                other=0.0), DOT_UPCAST)
        wk = tl.load(wkv_ptr + offs_n[:, None] * D + offs_k[None, :], mask=km[None, :], other=0.0)
        wg = tl.load(wg_ptr + offs_n[:, None] * D + offs_k[None, :], mask=km[None, :], other=0.0)
        acc_k = tl.dot(x, tl.trans(dot_operand(wk, DOT_UPCAST)), acc_k)
        acc_g = tl.dot(x, tl.trans(dot_operand(wg, DOT_UPCAST)), acc_g)
    pos = tl.load(pos_ptr + offs_m, mask=mm, other=0)
    emits = mm & ((pos + 1) % RATIO == 0)
    if pid_n == 0 and pid_s == 0:
        tl.store(em_ptr + offs_m, emits.to(tl.uint8), mask=mm)
    m2 = mm[:, None] & (offs_n < N)[None, :]
    # 1. the D split: the last of the tile's SPLIT programs sums the partials in split order (deterministic)
    done = True
    if SPLIT > 1:
        wrow = (pid_s * T + offs_m).to(tl.int64) * (2 * N)
        wofs = wrow[:, None] + offs_n[None, :]
        tl.store(ws_ptr + wofs, acc_k, mask=m2)
        tl.store(ws_ptr + wofs + N, acc_g, mask=m2)
        tl.debug_barrier()                                              # every thread's partial before the release
        ticket = cnt_ptr + pid_m * NT + pid_n
        done = tl.atomic_add(ticket, 1, sem="acq_rel", scope="gpu") == SPLIT - 1
        if done:
            acc_k = tl.zeros([BLOCK_M, BLOCK_N], tl.float32)
            acc_g = tl.zeros([BLOCK_M, BLOCK_N], tl.float32)
            for s in tl.static_range(SPLIT):
                sofs = wofs + (s - pid_s) * T * (2 * N)
                acc_k += tl.load(ws_ptr + sofs, mask=m2, other=0.0, cache_modifier=".cg")
                acc_g += tl.load(ws_ptr + sofs + N, mask=m2, other=0.0, cache_modifier=".cg")
            tl.atomic_xchg(ticket, 0, sem="relaxed", scope="gpu")
    if done:
        # 2. the finished tile: + ape on the scores, into the tokens' state rows
        seq = tl.load(seq_ptr + offs_m, mask=mm, other=0).to(tl.int64)
        ph = pos % RATIO
        acc_g += tl.load(ape_ptr + ph[:, None] * N + offs_n[None, :], mask=m2, other=0.0)
        row = seq[:, None] * s_sb + (OFF + ph)[:, None] * s_sr + offs_n[None, :]
        tl.store(sk_ptr + row, acc_k, mask=m2)
        tl.store(ss_ptr + row, acc_g, mask=m2)
        if EMIT and tl.max(emits.to(tl.int32), axis=0) > 0:
            # 3. pooling of channel block cb for the emitting tokens: once both halves' tiles are stored (overlap)
            tl.debug_barrier()                                          # the state stores before the release
            cb = (pid_n * BLOCK_N) % DD
            pool = True
            fin = cnt_ptr + MT * NT + pid_m
            if C == 2:
                pair = cnt_ptr + MT * NT + pid_m * (DD // BLOCK_N) + cb // BLOCK_N
                fin = cnt_ptr + MT * NT + MT * (DD // BLOCK_N) + pid_m
                pool = tl.atomic_add(pair, 1, sem="acq_rel", scope="gpu") == 1
                if pool:
                    tl.atomic_xchg(pair, 0, sem="relaxed", scope="gpu")
            if pool:
                ch = cb + tl.arange(0, BLOCK_N)
                for i in range(0, tl.minimum(BLOCK_M, T - pid_m * BLOCK_M)):
                    t = pid_m * BLOCK_M + i
                    p = tl.load(pos_ptr + t)
                    if (p + 1) % RATIO == 0:
                        sq = tl.load(seq_ptr + t).to(tl.int64)
                        y = _pool_channels(sk_ptr, ss_ptr, sq * s_sb, cb, s_sr, RATIO, DD, C, ROWS, BLOCK_N, RNE_FIX)
                        tl.store(cache_ptr + sq * s_cb + (p // RATIO) * s_cn + ch, y)
                        if C == 2:                                      # the current block becomes "previous"
                            tl.debug_barrier()                          # after this channel block's pooling reads
                            rr = tl.arange(0, ROWS)
                            rm = (rr < RATIO)[:, None]
                            for h in tl.static_range(2):
                                src = sq * s_sb + (rr + RATIO)[:, None] * s_sr + h * DD + ch[None, :]
                                kv = tl.load(sk_ptr + src, mask=rm, cache_modifier=".cg")
                                sc = tl.load(ss_ptr + src, mask=rm, cache_modifier=".cg")
                                tl.store(sk_ptr + src - RATIO * s_sr, kv, mask=rm)
                                tl.store(ss_ptr + src - RATIO * s_sr, sc, mask=rm)
                # 4. the last channel block of the row block to arrive finishes its emitting tokens' entries
                tl.debug_barrier()                                      # the pooled stores before the release
                if tl.atomic_add(fin, 1, sem="acq_rel", scope="gpu") == DD // BLOCK_N - 1:
                    for r0 in range(0, tl.minimum(BLOCK_M, T - pid_m * BLOCK_M), RB):
                        rows = pid_m * BLOCK_M + r0 + tl.arange(0, RB)
                        rp = tl.load(pos_ptr + rows, mask=rows < T, other=0)
                        rmask = (rows < T) & ((rp + 1) % RATIO == 0)
                        rs = tl.load(seq_ptr + rows, mask=rmask, other=0).to(tl.int64)
                        dst = rs * s_cb + (rp // RATIO) * s_cn
                        _finish_rows(cache_ptr, dst, rmask, (rp + 1 - RATIO).to(tl.float32), nw_ptr, f_ptr, eps, DD,
                                     R, ROTATE, RNE_FIX, DOT_UPCAST, KEY_FP4, kc_ptr, ke_ptr,
                                     rs * s_kcb + (rp // RATIO) * s_kcn, rs * s_keb + (rp // RATIO) * s_ken)
                    tl.atomic_xchg(fin, 0, sem="relaxed", scope="gpu")


@triton.jit
def _comp_emit_blocks(sk_ptr, ss_ptr, pos_ptr, seq_ptr, nw_ptr, f_ptr, cache_ptr, cnt_ptr, eps, RATIO, s_sb, s_sr,
                      s_cb, s_cn, DD: tl.constexpr, C: tl.constexpr, R: tl.constexpr, BN: tl.constexpr,
                      ROWS: tl.constexpr, RB: tl.constexpr, ROTATE: tl.constexpr, DOT_UPCAST: tl.constexpr,
                      RNE_FIX: tl.constexpr, PDL: tl.constexpr = False,
                      KEY_FP4: tl.constexpr = False, kc_ptr=None, ke_ptr=None, s_kcb=0, s_kcn=0, s_keb=0, s_ken=0):
    """The emit as a second launch (many emitting tokens), grid (T, DD / BN): program (t, j) pools channel block j
    of token t (and, overlap, moves its rows), the last of the token's DD / BN programs to arrive (ticket cnt[t])
    finishes the entry."""
    pdl_enter(PDL)
    t = tl.program_id(0)
    p = tl.load(pos_ptr + t)
    if (p + 1) % RATIO == 0:
        cb = tl.program_id(1) * BN
        ch = cb + tl.arange(0, BN)
        sq = tl.load(seq_ptr + t).to(tl.int64)
        y = _pool_channels(sk_ptr, ss_ptr, sq * s_sb, cb, s_sr, RATIO, DD, C, ROWS, BN, RNE_FIX)
        tl.store(cache_ptr + sq * s_cb + (p // RATIO) * s_cn + ch, y)
        if C == 2:                                                      # the current block becomes "previous"
            tl.debug_barrier()
            rr = tl.arange(0, ROWS)
            rm = (rr < RATIO)[:, None]
            for h in tl.static_range(2):
                src = sq * s_sb + (rr + RATIO)[:, None] * s_sr + h * DD + ch[None, :]
                tl.store(sk_ptr + src - RATIO * s_sr, tl.load(sk_ptr + src, mask=rm), mask=rm)
                tl.store(ss_ptr + src - RATIO * s_sr, tl.load(ss_ptr + src, mask=rm), mask=rm)
        tl.debug_barrier()                                              # the pooled stores before the release
        if tl.atomic_add(cnt_ptr + t, 1, sem="acq_rel", scope="gpu") == DD // BN - 1:
            rows = t + tl.arange(0, RB)
            rmask = rows == t
            dst = tl.zeros([RB], tl.int64) + sq * s_cb + (p // RATIO) * s_cn
            slot = (p // RATIO).to(tl.int64)
            _finish_rows(cache_ptr, dst, rmask, tl.zeros([RB], tl.float32) + (p + 1 - RATIO).to(tl.float32), nw_ptr,
                         f_ptr, eps, DD, R, ROTATE, RNE_FIX, DOT_UPCAST, KEY_FP4, kc_ptr, ke_ptr,
                         tl.zeros([RB], tl.int64) + sq * s_kcb + slot * s_kcn,
                         tl.zeros([RB], tl.int64) + sq * s_keb + slot * s_ken)
            tl.atomic_xchg(cnt_ptr + t, 0, sem="relaxed", scope="gpu")


# Above this many tokens the emit is a second launch (`_comp_emit_blocks`, one program per token and channel block)
# instead of the tile finishers' serial loop over their row block's emitting tokens.
EMIT_IN_STEP_MAX_T = 4


# The launch structure is part of the `triton` config space (PATH): "one" the kernel above (one launch up to
# EMIT_MAX_T tokens, two above), "split" the `triton_v2` code (projection, D-split reduce, per-token emit). A tuned
# entry picks it per (T, D, d, ratio); without one, the ratio decides (step_default). H200, 2026-12-01
# (docs/perf/h200-2026-12-01-session4.md, same run, us one / split): ratio 128 C=1 17.39 / 23.87, C=64 28.59 / 28.77;
# ratio 4 C=1 15.20 / 14.94, C=64 21.29 / 17.60; indexer (d 128, ratio 4) C=1 16.32 / 12.95.
STEP_PATHS = ("one", "split")
# Tuned entries are borrowed at other T and D, never across the ratio: the ratio decides the default path (H200,
# session 5: the ratio-128 key at T=1 borrowed ratio 4's split choice, 24.46 us, where the one launch took 17.39 in
# session 4; docs/perf/h200-2026-12-01-session5.md).
STEP_EXACT_KEYS = ("ratio",)
ONE_LAUNCH_MIN_RATIO = 8      # the overlapping ratio-4 compressors (c = 2) take the split path by default


def step_default(params: dict) -> dict:
    """PATH "one" (ratio >= ONE_LAUNCH_MIN_RATIO; a params dict without a ratio counts as such): compressor_default
    with the pooling step of the channel-parallel emit: ROWS 32 (a pooler holds ROWS x BLOCK_N fp32 kv and score
    values: 32 x 64 is 32 registers each at 4 warps), and RB 2 entries per finishing step (d = 512; RB 4 spilled 32
    bytes on sm_120 at ratio 128 with T = 2..4). PATH "split": triton_v2's default."""
    if params.get("ratio", ONE_LAUNCH_MIN_RATIO) < ONE_LAUNCH_MIN_RATIO:
        return {**compressor_default(params), "RB": 2, "PATH": "split"}
    return {**compressor_default(params), "ROWS": 32, "RB": 2, "PATH": "one"}


def step_configs(params: dict) -> list[dict]:
    """The `triton` space: compressor_configs under each PATH (the one-launch emit's pooling step up to 32 rows)."""
    return ([{**c, "RB": 2, "PATH": "one"} for c in compressor_configs(params, rows=(16, 32))]
            + [{**c, "RB": 2, "PATH": "split"} for c in compressor_configs(params)])


@register_impl("compressor_step", "triton", backend="triton", configs=step_configs, default_config=step_default,
               kernels=lambda: [_comp_step, _comp_emit_blocks, _comp_project, _comp_reduce, _comp_emit],
               options=frozenset({"EMIT_MAX_T"}))
def compressor_step(x, wkv, wgate, ape, norm_weight, eps, positions, seq_ids, freqs, state_kv, state_score, cache,
                    ratio: int, rotate: bool, key_codes=None, key_exps=None,
                    config: dict | None = None) -> torch.Tensor:
    """In place on state_kv, state_score and cache; returns emitted [T] bool ((p+1) % r == 0). PATH "one": one
    launch: projection split over D (the last program of each tile sums the partials), then the emit spread over the
    channel blocks (the last channel block finishes the entries); see the module docstring. PATH "split": the
    `triton_v2` code (compressor_step_v2). key_codes / key_exps (the indexer compressor, rotate): every emitted
    entry also in the FP4 key cache's form at [seq, p // r], written by the emit that finishes it (`store_fp4_keys`:
    the decoder's FP4 key cache without `fp4_pack_keys`' launch)."""
    from kernelbench.kernels import linear as KL
    c, d = _check_step(x, wkv, wgate, ape, norm_weight, freqs, state_kv, state_score, cache, positions, seq_ids,
                       ratio, rotate)
    t, dim = x.shape
    dev = check_device(x, wkv, wgate, ape, norm_weight, positions, seq_ids, freqs, state_kv, state_score, cache)
    key = {"T": t, "D": dim, "d": d, "ratio": ratio}
    cfg = config or lookup("compressor_step", key, step_default(key), exact=STEP_EXACT_KEYS)
    path = cfg.get("PATH", "one")
    if path not in STEP_PATHS:
        raise ValueError(f"compressor_step: PATH={path!r} must be one of {', '.join(STEP_PATHS)}")
    if path == "split":
        return compressor_step_v2(x, wkv, wgate, ape, norm_weight, eps, positions, seq_ids, freqs, state_kv,
                                  state_score, cache, ratio, rotate, key_codes, key_exps, config=cfg)
    keys = _key_args(key_codes, key_exps, cache, rotate)
    bn = cfg["BLOCK_N"]
    if d % bn:
        raise ValueError(f"compressor_step: BLOCK_N={bn} must divide d={d}")
    emitted = torch.empty(t, dtype=torch.bool, device=dev)
    if t == 0:
        return emitted
    n = c * d
    bm = cfg.get("BLOCK_M") or (16 if t <= 16 else 32)
    tiles = (n // bn, triton.cdiv(t, bm))
    split, kchunk = split_plan(dim, tiles[0] * tiles[1], cfg, sm_count(dev))
    ws = torch.empty(split, t, 2, n, dtype=torch.float32, device=dev) if split > 1 else state_kv
    in_step = t <= cfg.get("EMIT_MAX_T", EMIT_IN_STEP_MAX_T)
    tickets = KL.split_tickets(dev, max(tiles[0] * tiles[1] + tiles[1] * (d // bn + 1), t))
    r = 2 * freqs.shape[0]
    rows = min(cfg["ROWS"], triton.next_power_of_2(c * ratio))
    positions, seq_ids = positions.contiguous(), seq_ids.contiguous()
    norm_weight, freqs = norm_weight.contiguous(), freqs.contiguous()
    _comp_step[(*tiles, split)](
        x.contiguous(), wkv.contiguous(), wgate.contiguous(), ape.contiguous(), positions,
        seq_ids, state_kv, state_score, ws, tickets, norm_weight, freqs, cache,
        emitted.view(torch.uint8), t, dim, n, ratio, ratio if c == 2 else 0, state_kv.stride(0), state_kv.stride(1),
        cache.stride(0), cache.stride(1), kchunk, float(eps),
        DD=d, C=c, R=r, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=cfg["BLOCK_K"], SPLIT=split,
        ROWS=rows, RB=16 if rotate else cfg.get("RB", 2), ROTATE=bool(rotate), DOT_UPCAST=INTERPRET,
        RNE_FIX=INTERPRET, EMIT=in_step, num_warps=cfg["num_warps"], num_stages=cfg["num_stages"],
        **(pdl_args(dev, t, wkv, wgate) if kchunk % 8 == 0 else {}), **keys)
    if not in_step:
        _comp_emit_blocks[(t, d // bn)](
            state_kv, state_score, positions, seq_ids, norm_weight, freqs, cache, tickets, float(eps), ratio,
            state_kv.stride(0), state_kv.stride(1), cache.stride(0), cache.stride(1), DD=d, C=c, R=r, BN=bn,
            ROWS=rows, RB=16 if rotate else 1, ROTATE=bool(rotate), DOT_UPCAST=INTERPRET, RNE_FIX=INTERPRET,
            num_warps=4, num_stages=1, **pdl_args(dev, t), **keys)
    return emitted
