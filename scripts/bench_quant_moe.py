"""Benchmark + GPU verification of the quant / linear / MoE kernels (issue 4). Runs on the device machine:
    source scripts/device_env.sh && python3 scripts/bench_quant_moe.py
Per case: correctness vs the reference at the real shape (the op's tolerance), then the median time of
CUDA-graph replays over rotating input sets (more bytes than 3x the 60 MB L2), achieved bandwidth over
the op's fewest bytes as a fraction of the device-to-device copy bandwidth measured in this run, and the
reference PyTorch time (plain launches, events) where cheap. Writes $OUT/bench_quant_moe.json.
"""
from __future__ import annotations

import json
import os
import sys
import time
import traceback

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))
from _quant_moe_util import as_tuple, spec_and_impl  # noqa: E402

from kernelbench.harness import calibrate, timing  # noqa: E402
from kernelbench.harness.testing import error_stats, passes  # noqa: E402

OUT = os.environ.get("OUT", "/tmp")
DEADLINE = time.time() + float(os.environ.get("BENCH_BUDGET_S", "250"))
RESULTS: list[dict] = []


def copy_bandwidth() -> float:
    """bytes/s of a 1 GiB device-to-device copy, read + written (kernelbench.harness.calibrate)."""
    return calibrate.copy_bandwidth().value * 1e9


def graph_time(fn, sets) -> float:
    """Median seconds per call: one graph runs fn over every input set in turn (kernelbench.harness.timing)."""
    return timing.time_graph([lambda inp=inp: fn(inp) for inp in sets], launches=len(sets))[0].median_us * 1e-6


def event_time(fn, reps=5) -> float:
    fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        torch.cuda.synchronize()
        ts.append(s.elapsed_time(e) / 1e3)
    ts.sort()
    return ts[len(ts) // 2]


_BASE: dict = {}


def rotate(spec, p, n_sets, shared_keys=()):
    """n_sets input dicts on the GPU. With shared_keys (MoE weights, hundreds of MB: already more than the
    L2 and slow to draw on the CPU) the weights are drawn once per expert layout and only the activations
    and routing are fresh per set; the touched experts then differ from set to set."""
    if not shared_keys:
        return [spec.make_inputs(p, torch.Generator().manual_seed(i), "cuda", "normal") for i in range(n_sets)]
    key = (spec.name, p["El"], p["E"], p["D"], p["F"])
    if key not in _BASE:
        _BASE.clear()
        _BASE[key] = spec.make_inputs({**p, "T": 1}, torch.Generator().manual_seed(0), "cuda", "normal")
    base = _BASE[key]
    g = torch.Generator(device="cuda").manual_seed(1)
    T, D, E, K = p["T"], p["D"], p["E"], p["K"]
    sets = []
    for _ in range(n_sets):
        d = dict(base)
        d["x"] = (torch.randn(T, D, generator=g, device="cuda") * 4).to(torch.bfloat16)
        if "token_ids" in d:
            d["token_ids"] = torch.randint(0, p["V"], (T,), generator=g, device="cuda")
        if "indices" in d:
            d["indices"] = torch.rand(T, E, generator=g, device="cuda").argsort(-1)[:, :K].contiguous()
            w = torch.rand(T, K, generator=g, device="cuda") + 0.05
            d["weights"] = w / w.sum(-1, keepdim=True) * p["rs"]
        sets.append(d)
    return sets


def bench(op, p, label, n_sets=None, shared_keys=(), configs=(None,), ref_time=False, extra=None):
    if time.time() > DEADLINE:
        print(f"SKIP {op} {label}: out of time budget", flush=True)
        return
    spec, impl = spec_and_impl(op)
    cost = spec.cost(p)
    row = {"op": op, "label": label, "params": p, "bytes": cost.bytes, "flops": cost.flops}
    try:
        if n_sets is None:
            n_sets = max(2, min(32, int(3 * timing.l2_bytes() / max(cost.bytes, 1)) + 1))
        sets = rotate(spec, p, n_sets, shared_keys)
        # correctness at the real shape (first set), reference in fp32 on the GPU
        ref = as_tuple(spec.reference(**sets[0]))
        out = as_tuple(impl.fn(**sets[0]))
        tol = spec.tolerance(p)
        row["ok"] = True
        for name, o, r in zip(spec.outputs, out, ref):
            st = error_stats(o, r, tol[name])
            row[f"rel_fro_{name}"] = st.rel_fro
            row["ok"] &= passes(st, tol[name])
        best = None
        for cfg in configs:
            t = graph_time(lambda inp: impl.fn(**inp, **({"config": cfg} if cfg else {})), sets)
            row.setdefault("by_config", []).append({"config": cfg, "us": t * 1e6})
            if best is None or t < best[0]:
                best = (t, cfg)
        row["us"] = best[0] * 1e6
        row["config"] = best[1]
        row["GBps"] = cost.bytes / best[0] / 1e9
        row["frac_copy"] = cost.bytes / best[0] / COPY_BW
        if ref_time:
            row["ref_us"] = event_time(lambda: spec.reference(**sets[0])) * 1e6
        if extra:
            row.update(extra(sets))
    except Exception as e:  # noqa: BLE001 - keep benchmarking the other cases, record the failure
        row["error"] = f"{type(e).__name__}: {e}"
        traceback.print_exc()
    RESULTS.append(row)
    print(f"{op:14s} {label:28s} ok={row.get('ok')} us={row.get('us', float('nan')):9.1f} "
          f"frac_copy={row.get('frac_copy', float('nan')):.2f} ref_us={row.get('ref_us', float('nan')):9.1f} "
          f"{ {k: v for k, v in row.items() if k.startswith(('cublas', 'rel_fro'))} } cfg={row.get('config')}",
          flush=True)


def cublas_bf16(N, K):
    def extra(sets):
        M = sets[0]["x"].shape[0]
        n = max(2, min(16, int(3 * timing.l2_bytes() / (2 * N * K)) + 1))
        ws = [torch.randn(N, K, device="cuda", dtype=torch.bfloat16) for _ in range(n)]
        xs = [s["x"] for s in sets[:1]] * n
        t = graph_time(lambda i: torch.nn.functional.linear(xs[i], ws[i]), list(range(n)))
        return {"cublas_bf16_us": t * 1e6, "M": M}
    return extra


def main():
    global COPY_BW
    torch.manual_seed(0)
    COPY_BW = copy_bandwidth()
    dev = torch.cuda.get_device_name()
    print(f"device {dev}; copy bandwidth {COPY_BW / 1e9:.0f} GB/s (read + write)", flush=True)
    Cs = (1, 16, 64)
    # MoE layer first (the headline goal), Flash TP8 per rank: 32 local experts, top-6 of 256
    moe_p = lambda T, tp=8: {"T": T, "D": 4096, "E": 256, "El": 256 // tp, "offset": min(3, tp - 1) * (256 // tp),  # noqa: E731
                             "F": 2048, "K": 6, "V": 8192, "hash": False, "rs": 1.5}
    weights = ("w1", "s1", "w3", "s3", "w2", "s2", "shared_w1", "shared_s1", "shared_w3", "shared_s3",
               "shared_w2", "shared_s2", "weight", "bias")
    moe_cfgs = (None, {"BM": 16, "BN_UP": 16, "BN_DOWN": 16, "num_warps": 4, "num_stages": 2},
                {"BM": 16, "BN_UP": 64, "BN_DOWN": 64, "num_warps": 8, "num_stages": 2})
    for T in Cs:
        bench("moe_layer", moe_p(T), f"flash-tp8 C={T}", n_sets=8, shared_keys=weights, configs=moe_cfgs,
              ref_time=T == 16)
    for T in Cs:
        bench("moe_experts", moe_p(T), f"flash-tp8 C={T}", n_sets=8, shared_keys=weights[:6])
    bench("moe_layer", moe_p(64, 1), "flash-tp1 C=64", n_sets=4, shared_keys=weights)
    for T in Cs:
        bench("moe_gate", moe_p(T), f"flash C={T}", ref_time=T == 16)
        bench("shared_expert", {"T": T, "D": 4096, "F": 2048}, f"flash C={T}", ref_time=T == 16)
    # FP8 linear at the anchor shapes (+ TP1 wq_b, 32 MB)
    fp8_cfgs = (None, {"BM": 16, "BN": 32, "SPLIT": 4, "num_warps": 4, "num_stages": 3},
                {"BM": 16, "BN": 64, "SPLIT": 8, "num_warps": 8, "num_stages": 4})
    for name, N, K in (("wq_a", 1024, 4096), ("wkv", 512, 4096), ("wq_b/wo_b tp8", 4096, 1024),
                       ("shared.w1", 2048, 4096), ("shared.w2", 4096, 2048), ("wq_b tp1", 32768, 1024)):
        for T in Cs:
            bench("fp8_linear", {"M": T, "N": N, "K": K}, f"{name} C={T}", configs=fp8_cfgs, ref_time=T == 16,
                  extra=cublas_bf16(N, K))
    for name, N, K in (("expert.w1", 2048, 4096), ("expert.w2", 4096, 2048)):
        for T in Cs:
            bench("fp4_linear", {"M": T, "N": N, "K": K}, f"{name} C={T}", ref_time=T == 16)
    for T in Cs:
        bench("act_quant_fp8", {"M": T, "K": 4096, "group": 128, "scale_fmt": "ue8m0"}, f"C={T}", ref_time=T == 16)
        bench("bf16_linear", {"M": T, "N": 256, "K": 4096}, f"gate C={T}", ref_time=T == 16)
        bench("lm_head", {"T": T, "V": 16160, "D": 4096}, f"tp8 C={T}", ref_time=T == 16)
        bench("grouped_wo_a", {"T": T, "Gl": 1, "O": 1024, "I": 4096}, f"tp8 C={T}", ref_time=T == 16)
    bench("fp8_simulate", {"M": 64, "N": 448, "group": 64, "scale_fmt": "ue8m0"}, "kv C=64")
    bench("act_quant_fp4", {"M": 64 * 8, "K": 128, "group": 32}, "indexer q tp8 C=64")
    # CUDA-graph capture of the whole layer must give the same bits as eager (deterministic combine)
    spec, impl = spec_and_impl("moe_layer")
    inp = spec.make_inputs(moe_p(16), torch.Generator().manual_seed(5), "cuda", "normal")
    eager = impl.fn(**inp)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        cap = impl.fn(**inp)
    g.replay()
    torch.cuda.synchronize()
    print("graph replay == eager:", bool(torch.equal(cap, eager)), flush=True)
    with open(os.path.join(OUT, "bench_quant_moe.json"), "w") as f:
        json.dump({"device": dev, "copy_GBps": COPY_BW / 1e9, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                   "torch": torch.__version__, "results": RESULTS, "graph_equal": bool(torch.equal(cap, eager))},
                  f, indent=1, default=str)
    print("\nSUMMARY")
    for r in RESULTS:
        print(f"{r['op']:14s} {r['label']:26s} {'OK ' if r.get('ok') else 'BAD'} {r.get('us', float('nan')):8.1f} us "
              f"{r.get('frac_copy', float('nan')):5.2f} copy  ref {r.get('ref_us', float('nan')):8.1f} us "
              f"cublas {r.get('cublas_bf16_us', float('nan')):6.1f} {r.get('error', '')[:60]}")


if __name__ == "__main__":
    main()
