"""Time moe_experts / moe_layer configs of the grouped kernel (impl "triton") beside triton_v1's default, on the
same rotating input sets (drawn once per shape: drawing 400 MB of experts per config would dominate). GPU only.

    python3 scripts/moe_sweep.py [--op moe_experts] [--batch 1 16 64] [--json out.json]
Prints one line per (C, impl, config): median us; the JSON keeps every summary."""
from __future__ import annotations

import argparse
import json
import time

import torch

from kernelbench import registry
from kernelbench.harness import timing
from kernelbench.config import get_shape_set

SWEEP = {   # C -> grouped configs to try (the default is always timed too)
    "small": [dict(SPLIT_UP=su, SPLIT_DOWN=sd, num_warps=w) for su, sd in ((4, 2), (8, 4), (16, 8)) for w in (4, 8)],
    "large": [dict(SPLIT_UP=su, SPLIT_DOWN=sd, num_warps=w) for su, sd in ((1, 1), (2, 1), (4, 2)) for w in (4, 8)]
    + [dict(SPLIT_UP=2, SPLIT_DOWN=1, num_stages=2)],
}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--op", default="moe_experts")
    ap.add_argument("--batch", type=int, nargs="*", default=[1, 16, 64])
    ap.add_argument("--shapes", default="flash-tp8")
    ap.add_argument("--max-time", type=float, default=0.3)
    ap.add_argument("--json", default="")
    ap.add_argument("--defaults-only", action="store_true")
    a = ap.parse_args()
    registry.load_builtin()
    spec = registry.get_op(a.op)
    new, old = registry.get_impl(a.op, "triton"), registry.get_impl(a.op, "triton_v1")
    rows = []
    for params in spec.shape_cases(get_shape_set(a.shapes)):
        if params["T"] not in a.batch or params.get("hash"):
            continue
        sets, _, _ = timing.make_sets(spec, params, torch.device("cuda"), 0, timing.l2_bytes(), max_sets=16)
        base = new.default_config(params)
        prepped = [new.prepared(s) for s in sets]            # the load-time layout of the grouped kernel
        trials = [(old, None), (new, None)] + ([] if a.defaults_only else [(new, {**base, **c}) for c in
                                               SWEEP["small" if params["T"] <= 4 else "large"]])
        if a.op == "moe_layer":              # the shared expert inside the grouped launches, or beside them
            trials.append((new, {**base, "SHARED": "beside"}))
        ref = None
        for impl, cfg in trials:
            kw = {"config": cfg} if cfg else {}
            calls = [(lambda s=s: impl.fn(**s, **kw)) for s in (prepped if impl is new else sets)]
            t0 = time.time()
            try:
                out = calls[0]()
                out = (out[0] if isinstance(out, tuple) else out).float()
                ref = out if ref is None else ref          # triton_v1's output on set 0 (verified kernel)
                err = float((out - ref).norm() / ref.norm().clamp_min(1e-30))
                torch.cuda.synchronize()
                summ, _, _ = timing.time_graph(calls, max_time_s=a.max_time)
                us = summ.median_us
            except Exception as e:  # noqa: BLE001 - report and go on
                print(f"T={params['T']} {impl.name} {cfg}: {type(e).__name__}: {e}")
                continue
            print(f"T={params['T']:3d} {impl.name:9s} {us:9.2f} us  rel_fro vs v1 {err:.1e}  ({time.time() - t0:.1f} s)  {cfg or 'default'}",
                  flush=True)
            rows.append({"op": a.op, "T": params["T"], "impl": impl.name, "config": cfg or "default",
                         "median_us": us, "rel_fro_vs_v1": err, "iqr_us": summ.iqr_us, "n": summ.n})
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
