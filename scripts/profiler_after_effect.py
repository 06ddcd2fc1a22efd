"""Does a torch.profiler run slow down later graph replays in the same process? The 43-layer Flash TP8 rank step
(random weights, context 512, CUDA graph) timed at C = 16 and 64, then one profiled point (C = 1, the
attribution decode-bench --profile runs), then the same two points timed again, all in one process on one model.
Before 2026-12-02 decode-bench profiled each point right after timing it, so every later point was timed after a
profile. Needs a GPU.

    python scripts/profiler_after_effect.py [--batches 16,64] [--rounds 2] [--json OUT]"""
from __future__ import annotations

import argparse
import json

import torch

from kernelbench.decoder import decode_bench as db
from kernelbench.decoder.tp import TPContext


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--batches", default="16,64")
    ap.add_argument("--rounds", type=int, default=2, help="timed passes before and after the profile")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--json", default="")
    a = ap.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("needs a CUDA device")
    dev = torch.device("cuda")
    batches = [int(b) for b in a.batches.split(",")]
    cfg = db.bench_config("flash", "flash", False)
    tp = TPContext(rank=0, world=8, simulate=True)
    model = db.random_model(tp, cfg, "triton", dev)
    ctx = db.parse_context("512")
    kw = dict(steps=a.steps, warmup=3, graph="on", model=model)

    def timed(label: str) -> list[dict]:
        res = db.run_bench(tp, cfg, "triton", "cuda", batches, ctx, **kw)
        rows = [{"when": label, "C": p.batch, "step_ms": p.step_ms, "q1_ms": p.q1_ms, "q3_ms": p.q3_ms}
                for p in res.points]
        for r in rows:
            print(f"{label:16s} C={r['C']:3d} step {r['step_ms']:.3f} ms (q1 {r['q1_ms']:.3f}, q3 {r['q3_ms']:.3f})",
                  flush=True)
        return rows

    rows = []
    for i in range(a.rounds):
        rows += timed(f"before, pass {i}")
    prof = db.run_bench(tp, cfg, "triton", "cuda", [1], ctx, profile=True, **kw)
    print(f"profiled C=1: step {prof.points[0].step_ms:.3f} ms, {prof.points[0].kernels_per_step:.0f} kernels",
          flush=True)
    for i in range(a.rounds):
        rows += timed(f"after, pass {i}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
