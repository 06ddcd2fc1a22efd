"""Benchmark the norm / RoPE / Hadamard / mHC / embedding / sampling kernels on a GPU (H200).

Every case runs the Triton kernel and the PyTorch reference through `kernelbench.harness.timing.measure_impl`:
CUDA-graph replay of back-to-back launches over rotating fresh input sets (>= 3 x L2 where the set
count allows), median of the replays, outputs rechecked against the reference. The device-to-device
copy bandwidth is measured first in the same run, and each kernel's achieved bandwidth (the op's
fewest bytes / median time) is reported as a fraction of it. The mHC layer goal (issue 5) is
2 x mhc_post_pre per layer (attention and FFN boundaries) at C = 64.

    source scripts/device_env.sh && python3 scripts/bench_mhc_norm.py      # writes $OUT/mhc_norm_bench.jsonl
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

import torch

from kernelbench import registry
from kernelbench.harness.timing import measure_impl, require_cuda, time_graph


def copy_bandwidth_gbps(nbytes: int = 512 * 2 ** 20) -> float:
    """Bytes read + written per second of a large device-to-device copy (median of graph replays)."""
    src = torch.randn(nbytes // 4, device="cuda")
    dst = torch.empty_like(src)
    summary, _, _ = time_graph([lambda: dst.copy_(src)], launches=8, max_time_s=1.0)
    return 2 * nbytes / summary.median_us / 1e3


def pick(op: str, shape_set: str, batches=(1, 16, 64), **match) -> list[tuple[str, dict]]:
    spec = registry.get_op(op)
    out = []
    for p in spec.shape_cases(shape_set):
        c = p.get("T", p.get("M", p.get("N")))
        if c in batches and all(p.get(k) == v for k, v in match.items()):
            out.append((op, p))
    return out


def cases() -> list[tuple[str, dict]]:
    """In priority order (the run stops adding cases near its time budget)."""
    mhc = [c for op in ("mhc_post_pre", "mhc_pre", "mhc_post") for c in pick(op, "flash-tp8")]
    return (mhc + pick("mhc_post_pre", "pro-tp8", (64,)) + pick("mhc_head", "flash-tp8", (16, 64))
            + pick("rms_norm", "flash-tp8", N=4096) + pick("rms_norm", "flash-tp8", (16,), N=1024)
            + pick("head_rms_norm_rope", "flash-tp8", compressed=True)
            + pick("head_rms_norm_rope", "flash-tp1", (16, 64), compressed=True)
            + pick("rope", "flash-tp8", (16, 64), H=8, compressed=True)
            + pick("hadamard", "flash-tp8", (16, 64), H=8)
            + pick("sample", "flash-tp8") + pick("embedding", "flash-tp8", (16,)))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--budget-s", type=float, default=190.0, help="stop starting new cases after this")
    ap.add_argument("--max-time-s", type=float, default=0.4, help="timing time per measurement")
    args = ap.parse_args()
    t0 = time.time()
    require_cuda()
    registry.load_builtin()
    path = os.path.join(args.out, "mhc_norm_bench.jsonl")
    log = open(path, "w")
    dev = torch.cuda.get_device_name()
    bw = copy_bandwidth_gbps()
    head = {"kind": "device", "device": dev, "copy_gbps": bw, "torch": torch.__version__,
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    import triton
    head["triton"] = triton.__version__
    print(json.dumps(head), flush=True)
    log.write(json.dumps(head) + "\n")
    rows = []
    for op, params in cases():
        if time.time() - t0 > args.budget_s:
            print(f"budget reached: skipping {op} {params}", flush=True)
            continue
        spec = registry.get_op(op)
        res = {}
        for impl_name in ("triton", "reference"):
            impl = registry.get_impl(op, impl_name)
            try:
                m = measure_impl(spec, impl, params, max_time_s=args.max_time_s, max_sets=128)
            except Exception as e:  # noqa: BLE001 - record and go on
                rec = {"kind": "error", "op": op, "impl": impl_name, "params": params,
                       "error": f"{type(e).__name__}: {e}"}
                print(json.dumps(rec), flush=True)
                log.write(json.dumps(rec) + "\n")
                continue
            rec = {"kind": "measure", "op": op, "impl": impl_name, "label": m.label, "params": params,
                   "median_us": m.summary.median_us, "q1_us": m.summary.q1_us, "q3_us": m.summary.q3_us,
                   "n": m.summary.n, "bytes": m.bytes, "flops": m.flops, "gbps": m.gbps,
                   "frac_copy_bw": m.gbps / bw, "verified": m.verified, "verify": m.verify_detail,
                   "sets": m.sets, "l2_cold": m.l2_cold, "launches": m.launches, "sm_clock_mhz": m.sm_clock_mhz,
                   "roofline_error": m.roofline_error, "notes": m.notes}
            log.write(json.dumps(rec, default=str) + "\n")
            log.flush()
            res[impl_name] = rec
        if "triton" in res:
            tr = res["triton"]
            ref = res.get("reference", {}).get("median_us")
            rows.append((op, tr["label"], tr["median_us"], ref, tr["frac_copy_bw"], tr["verified"]))
            print(f"{op:20s} {tr['label'][:58]:58s} triton {tr['median_us']:8.2f} us  ref "
                  f"{ref if ref is None else round(ref, 2)} us  {100 * tr['frac_copy_bw']:5.1f}% copy BW  "
                  f"verified={tr['verified']}", flush=True)
    # the mHC layer goal: 2 x post_pre (attention + FFN boundaries) at C = 64, Flash
    for op, lab, t, ref, frac, ok in rows:
        if op == "mhc_post_pre" and lab.startswith("T=64,D=4096"):
            cost = registry.get_op(op).cost({"T": 64, "D": 4096, "iters": 20})
            floor = 2 * cost.bytes / (bw * 1e3)
            goal = {"kind": "mhc_layer_goal", "layer_us": 2 * t, "byte_floor_us": floor,
                    "ratio_to_floor": 2 * t / floor, "goal_us": max(2 * floor, 15.0)}
            print(json.dumps(goal), flush=True)
            log.write(json.dumps(goal) + "\n")
    print(f"\ncopy bandwidth {bw:.0f} GB/s on {dev}; {len(rows)} cases in {time.time() - t0:.0f} s")
    print(f"{'op':20s} {'case':44s} {'triton us':>9s} {'ref us':>9s} {'speedup':>7s} {'%copyBW':>7s}")
    for op, lab, t, ref, frac, ok in rows:
        sp = f"{ref / t:7.1f}" if ref else "    n/a"
        print(f"{op:20s} {lab[:44]:44s} {t:9.2f} {ref if ref is None else round(ref, 2):>9} {sp} "
              f"{100 * frac:6.1f}%{'' if ok else '  UNVERIFIED'}")
    log.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
