"""Run registered ops once each inside a CUDA profiler range, for Nsight Compute (GPU only).

    ncu --profile-from-start off --clock-control none --section SpeedOfLight ... \\
        python3 scripts/profile_op.py moe_layer --impl triton --batch 64 [--where hash=False]

Each selected shape case gets fresh random inputs (never zeros), the implementation's load-time layout
(`Impl.prepared`), three untimed warm-up calls (compilation, autotune caches) and then exactly one profiled
call, so the report lists that call's kernels in launch order. The case order is printed on stdout."""
from __future__ import annotations

import argparse

import torch

from kernelbench import registry
from kernelbench.harness.bench import select_cases


def _matches(params: dict, where: list[str]) -> bool:
    """KEY=VALUE conditions; a condition binds only the cases that have the key."""
    for cond in where:
        key, _, value = cond.partition("=")
        if key in params and str(params[key]) != value:
            return False
    return True


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("ops", nargs="+")
    ap.add_argument("--impl", default="triton")
    ap.add_argument("--shapes", default="flash-tp8")
    ap.add_argument("--batch", type=int, action="append", default=[])
    ap.add_argument("--context", type=int, action="append", default=[], help="context length (cases with ctx)")
    ap.add_argument("--where", action="append", default=[], help="KEY=VALUE on the shape case, repeatable")
    a = ap.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("profile_op.py needs a CUDA GPU (Nsight Compute profiles device kernels)")
    registry.load_builtin()
    dev = torch.device("cuda")
    gen = torch.Generator().manual_seed(0)
    for op in a.ops:
        spec = registry.get_op(op)
        impl = registry.get_impl(op, a.impl)
        for params in select_cases(spec, (a.shapes,), tuple(a.batch), tuple(a.context)):   # bench's selection
            if not _matches(params, a.where):
                continue
            inputs = impl.prepared(spec.make_inputs(params, gen, dev, "normal"))
            for _ in range(3):
                impl.fn(**inputs)
            torch.cuda.synchronize()
            print(f"profiled: {op}/{a.impl} {params}", flush=True)
            torch.cuda.cudart().cudaProfilerStart()
            impl.fn(**inputs)
            torch.cuda.synchronize()
            torch.cuda.cudart().cudaProfilerStop()


if __name__ == "__main__":
    main()
