"""Benchmark the attention-path kernels on one GPU: sparse_attention and indexer_topk (Triton) at
DeepSeek-V4-Flash decode shapes, against the PyTorch reference, as fractions of the copy bandwidth
measured in the same run.

    source scripts/device_env.sh && python3 scripts/bench_attention.py          # on the GPU machine
    TRITON_INTERPRET=1 python scripts/bench_attention.py --smoke                # CPU: the script's logic only

Timing: one CUDA graph of back-to-back calls cycling over distinct input sets (enough sets that the
bytes touched exceed 3x the L2 where memory allows), replayed 15 times; the median replay divided
by the number of calls. Bytes: the cache entries actually read (once) plus q/out, indices excluded.
Writes $OUT/bench_attention.json (every number) and prints a table last.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import time

import torch

from kernelbench.harness import calibrate, timing
from kernelbench.config import FLASH
from kernelbench.kernels import attention as KA
from kernelbench.kernels import indexer as KI
from kernelbench.reference.attention import sparse_attention as ref_attention
from kernelbench.reference.indexer import indexer_topk as ref_topk
from kernelbench.reference.rope import rope_freqs

T0 = time.time()
BUDGET_S = float(os.environ.get("BENCH_BUDGET_S", "230"))   # stop starting new cases past this


def over_budget(what: str) -> bool:
    if time.time() - T0 > BUDGET_S:
        print(f"SKIPPED (time budget): {what}", flush=True)
        return True
    return False


def copy_bandwidth(dev) -> float:
    """GB/s of a 1 GiB device-to-device copy, bytes read + written (kernelbench.harness.calibrate)."""
    return calibrate.copy_bandwidth().value


def graph_time_us(fn, sets: list) -> float:
    """Median per-call microseconds of a CUDA graph of len(sets) calls, one per input set (kernelbench.harness.timing)."""
    return timing.time_graph([lambda s=s: fn(s) for s in sets], launches=len(sets))[0].median_us


def eager_time_us(fn, sets: list, reps: int = 5) -> float:
    fn(sets[0])
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for i in range(reps):
        fn(sets[i % len(sets)])
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / reps * 1e6


def n_sets(bytes_per_call: float, bytes_per_set: float, cap: int = 64, mem_budget: float = 24e9) -> int:
    want = max(2, math.ceil(3 * timing.l2_bytes() / max(bytes_per_call, 1)))
    return int(max(2, min(cap, want, mem_budget // max(bytes_per_set, 1))))


# sparse attention --------------------------------------------------------------------------------
def attention_set(c, hl, dev, gen, entries=2176, topk=512, window=128):
    """One decode step: C sequences of `entries` cache rows (window + compressed), window + top-k selected."""
    kv = torch.randn(c, entries, 512, device=dev, generator=gen).bfloat16()
    q = torch.randn(c, hl, 512, device=dev, generator=gen).bfloat16()
    comp = torch.stack([torch.randperm(entries - window, device=dev, generator=gen)[:topk] for _ in range(c)]) + window
    idx = torch.cat([torch.arange(window, device=dev).expand(c, -1), comp], 1).to(torch.int32)
    return {"q": q, "kv": kv, "seq_ids": torch.randperm(c, device=dev, generator=gen), "indices": idx,
            "sink": torch.randn(hl, device=dev, generator=gen), "scale": 512 ** -0.5,
            "positions": torch.full((c,), 8191, device=dev), "freqs": rope_freqs(FLASH, True).to(dev)}


ATTN_CONFIGS = [KA.attention_default({})] + [
    {"BLOCK_H": 16, "BLOCK_N": bn, "num_warps": w, "num_stages": s, "waves": wv}
    for bn, w, s, wv in ((16, 4, 1, 4), (32, 4, 1, 4), (32, 4, 2, 4), (64, 4, 1, 2), (32, 8, 2, 2), (16, 4, 2, 8),
                         (32, 4, 2, 1))]


def bench_attention(dev, gen, bw, smoke=False) -> list[dict]:
    rows = []
    shapes = [(1, 8), (16, 8), (64, 8), (1, 64), (16, 64), (64, 64)] if not smoke else [(2, 8)]
    for c, hl in shapes:
        if over_budget(f"attention C={c} Hl={hl}"):
            continue
        s0 = attention_set(c, hl, dev, gen) if not smoke else attention_set(c, hl, dev, gen, 300, 40, 16)
        ksel = s0["indices"].shape[1]
        bytes_call = c * ksel * 512 * 2 + 2 * c * hl * 512 * 2
        ref = ref_attention(**s0)
        if smoke:
            out = KA.sparse_attention(**s0)
            rel = float((out.float() - ref.float()).norm() / ref.float().norm())
            rows.append({"op": "sparse_attention", "C": c, "Hl": hl, "rel_fro": rel})
            continue
        ns = n_sets(bytes_call, s0["kv"].numel() * 2)
        sets = [s0] + [attention_set(c, hl, dev, gen) for _ in range(ns - 1)]
        best = None
        for cfg in ATTN_CONFIGS if hl == 8 else [dict(cf, BLOCK_H=bh) for cf in ATTN_CONFIGS[:4] for bh in (16, 32)]:
            out = KA.sparse_attention(**s0, config=cfg)
            rel = float((out.float() - ref.float()).norm() / ref.float().norm())
            us = graph_time_us(lambda s, cfg=cfg: KA.sparse_attention(**s, config=cfg), sets)
            print(f"attn C={c} Hl={hl} {cfg} {us:.1f} us rel={rel:.1e}", flush=True)
            row = {"op": "sparse_attention", "C": c, "Hl": hl, "Ksel": ksel, "config": cfg, "us": us,
                   "GBps": bytes_call / us / 1e3, "frac_copy": bytes_call / us / 1e3 / bw, "rel_fro": rel,
                   "default": cfg == KA.attention_default({}), "sets": ns, "bytes": bytes_call}
            rows.append(row)
            if best is None or us < best["us"]:
                best = row
        best["best"] = True
        if c == 16 or c == 1:
            rows.append({"op": "sparse_attention", "impl": "reference", "C": c, "Hl": hl,   # syncs: no graph
                         "us": eager_time_us(lambda s: ref_attention(**s), sets[:4])})
    return rows


# indexer -----------------------------------------------------------------------------------------
def indexer_set(c, ctx, cap, dev, gen, hi=64, topk=512):
    n = ctx // 4
    keys = torch.empty(c, cap, 128, device=dev, dtype=torch.bfloat16)
    keys[:, :n] = torch.randn(c, n, 128, device=dev, generator=gen).bfloat16()
    if cap > n:
        keys[:, n:] = float("nan")                       # never read by a correct kernel
    return {"qi": torch.randn(c, hi, 128, device=dev, generator=gen).bfloat16(),
            "w": (torch.randn(c, hi, device=dev, generator=gen) * (128 ** -0.5 * hi ** -0.5)).bfloat16(), "k_cache": keys,
            "seq_ids": torch.randperm(c, device=dev, generator=gen), "positions": torch.full((c,), ctx - 1, device=dev),
            "topk": topk, "ratio": 4}


_D = KI.indexer_default({})
IDX_CONFIGS = [_D, {**_D, "BLOCK_S": 64}, {**_D, "num_warps": 8}, {**_D, "waves": 2},
               {**_D, "SCAN": 8192}, {**_D, "SCAN": 2048, "TOPK_WARPS": 8}]


def scores_only(s: dict, cfg: dict) -> None:
    """The score launch of KI.indexer_topk alone (same arguments), to split its time from the top-k."""
    qi, k, t = s["qi"], s["k_cache"], s["qi"].shape[0]
    scores = torch.empty(t, k.shape[1], dtype=torch.float32, device=qi.device)
    p = max(1, -(-cfg["waves"] * KA.sm_count(qi.device) // t))
    KI._index_scores[(t, p)](qi, s["w"], k, s["seq_ids"], s["positions"], scores, qi.shape[1], 4, p,
                             qi.stride(0), qi.stride(1), s["w"].stride(0), k.stride(0), k.stride(1), scores.stride(0),
                             DI=128, BLOCK_HI=64, BLOCK_S=cfg["BLOCK_S"], DOT_UPCAST=False, RNE_FIX=False,
                             num_warps=cfg["num_warps"], num_stages=cfg["num_stages"])


def check_topk(out, ref) -> dict:
    same = float((out[0] == ref[0]).float().mean())
    sc = float((out[1] - ref[1]).abs().nan_to_num(0).max())
    return {"idx_agree": same, "score_maxabs": sc}


def bench_indexer(dev, gen, bw, smoke=False) -> list[dict]:
    rows = []
    if smoke:
        s = indexer_set(2, 2000, 600, dev, gen, hi=8, topk=40)
        return [{"op": "indexer_topk", **check_topk(KI.indexer_topk(**s), ref_topk(**s))}]
    # most important first (the time budget may cut the tail): the C=64 64K goal, the capacity pair
    cases = [(64, 65536, 16384), (64, 8192, 2048), (64, 8192, 1048576 // 4), (16, 8192, 2048),
             (16, 8192, 1048576 // 4), (64, 512, 128), (64, 1048576, 262144)]
    cases += [(c, ctx, ctx // 4) for c in (1, 16) for ctx in (512, 8192, 65536, 1048576) if (c, ctx) != (16, 8192)]
    for c, ctx, cap in cases:
        if over_budget(f"indexer C={c} ctx={ctx} cap={cap}"):
            continue
        s0 = indexer_set(c, ctx, cap, dev, gen)
        n = ctx // 4
        bytes_call = c * n * 128 * 2 + c * 64 * 128 * 2
        ns = n_sets(bytes_call, s0["k_cache"].numel() * 2, cap=32, mem_budget=20e9)
        sets = [s0] + [indexer_set(c, ctx, cap, dev, gen) for _ in range(ns - 1)]
        chk = check_topk(KI.indexer_topk(**s0), ref_topk(**s0)) if c <= 16 or ctx <= 65536 else {}
        best = None
        for cfg in IDX_CONFIGS if cap == n else IDX_CONFIGS[:1]:
            us = graph_time_us(lambda s, cfg=cfg: KI.indexer_topk(**s, config=cfg), sets)
            print(f"idx C={c} ctx={ctx} cap={cap} {cfg} {us:.1f} us {chk}", flush=True)
            row = {"op": "indexer_topk", "C": c, "ctx": ctx, "cap": cap, "config": cfg, "us": us,
                   "GBps": bytes_call / us / 1e3, "frac_copy": bytes_call / us / 1e3 / bw, "sets": ns,
                   "default": cfg == KI.indexer_default({}), "bytes": bytes_call, **chk}
            rows.append(row)
            if best is None or us < best["us"]:
                best = row
        best["best"] = True
        best["scores_only_us"] = graph_time_us(lambda s, cfg=best["config"]: scores_only(s, cfg), sets)
        print(f"idx C={c} ctx={ctx} scores only {best['scores_only_us']:.1f} us", flush=True)
        if c == 16 and ctx <= 65536:
            rows.append({"op": "indexer_topk", "impl": "reference", "C": c, "ctx": ctx,
                         "us": eager_time_us(lambda s: ref_topk(**s), sets, reps=3)})
        del sets, s0
        torch.cuda.empty_cache()
    return rows


# kv_write and compressor_step (small ops: launch-bound; timed for the record) --------------------
def bench_small_ops(dev, bw) -> list[dict]:
    from kernelbench import registry
    from kernelbench.kernels import compressor as KC
    from kernelbench.kernels import kv as KV
    registry.load_builtin()
    rows = []
    for op, fn in (("kv_write", KV.kv_write), ("compressor_step", KC.compressor_step)):
        spec = registry.get_op(op)
        for p in spec.shape_cases("flash-tp8"):
            if over_budget(f"{op} {p}"):
                continue
            gen = torch.Generator().manual_seed(7)
            sets = [spec.make_inputs(p, gen, dev, "normal") for _ in range(4)]
            us = graph_time_us(lambda s: fn(**s), sets)
            cost = spec.cost(p)
            print(f"{op} {p} {us:.1f} us", flush=True)
            rows.append({"op": op, "params": p, "us": us, "GBps": cost.bytes / us / 1e3,
                         "frac_copy": cost.bytes / us / 1e3 / bw, "sets": len(sets)})
    return rows


def summary(rows, bw) -> str:
    lines = [f"copy bandwidth (read + write): {bw:.0f} GB/s"]
    for r in rows:
        if r["op"] in ("kv_write", "compressor_step"):
            lines.append(f"{r['op']:16s} {json.dumps(r['params'])} {r['us']:.1f} us {100 * r['frac_copy']:.1f}%")
        elif r.get("impl") == "reference":
            lines.append(f"  reference {r['op']} C={r['C']} {'Hl=' + str(r.get('Hl')) if 'Hl' in r else 'ctx=' + str(r.get('ctx'))}: {r['us']:.1f} us")
        elif r.get("best") or r.get("default"):
            tag = "best" if r.get("best") else "default"
            shape = f"Hl={r['Hl']}" if r["op"] == "sparse_attention" else f"ctx={r['ctx']} cap={r['cap']}"
            extra = f"rel={r['rel_fro']:.1e}" if "rel_fro" in r else (f"agree={r.get('idx_agree', float('nan')):.4f}"
                                                                      f" scores-only={r.get('scores_only_us', 0):.1f}us")
            lines.append(f"{r['op']:16s} C={r['C']:<3d} {shape:22s} {tag:7s} {r['us']:9.1f} us "
                         f"{r['GBps']:7.0f} GB/s {100 * r['frac_copy']:5.1f}% {extra} {json.dumps(r['config'])}")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--smoke", action="store_true", help="tiny shapes, no graphs (CPU interpreter)")
    ap.add_argument("--only", choices=["attention", "indexer", "small"], default=None)
    args = ap.parse_args()
    dev = "cpu" if args.smoke else "cuda"
    gen = torch.Generator(device=dev).manual_seed(2026)
    info = {"device": torch.cuda.get_device_name() if not args.smoke else "cpu", "torch": torch.__version__,
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    import triton
    info["triton"] = triton.__version__
    bw = copy_bandwidth(dev) if not args.smoke else 1.0
    rows = []
    out = os.environ.get("OUT", "/tmp")

    def save():
        with open(os.path.join(out, "bench_attention.json"), "w") as f:
            json.dump({"info": info, "copy_GBps": bw, "rows": rows}, f, indent=1, default=str)

    if args.only in (None, "attention"):
        rows += bench_attention(dev, gen, bw, args.smoke)
        save()
        print(summary(rows, bw), flush=True)
    if args.only in (None, "indexer"):
        rows += bench_indexer(dev, gen, bw, args.smoke)
        save()
    if args.only in (None, "small") and not args.smoke:
        rows += bench_small_ops(dev, bw)
        save()
    if not args.smoke:
        fit = [r for r in rows if r["op"] == "indexer_topk" and r.get("best") and r["C"] == 64 and r["cap"] == r["ctx"] // 4]
        if len(fit) >= 2:   # least-squares t = a + b * ctx at C = 64
            xs, ys = [r["ctx"] for r in fit], [r["us"] for r in fit]
            mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
            b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
            info["indexer_fit_C64"] = {"a_us": my - b * mx, "b_us_per_1k_tokens": 1e3 * b,
                                       "points": list(zip(xs, ys)),
                                       "residual_frac": [abs(y - (my - b * mx + b * x)) / y for x, y in zip(xs, ys)]}
    save()
    print(json.dumps(info, default=str))
    print(summary(rows, bw))


if __name__ == "__main__":
    main()
