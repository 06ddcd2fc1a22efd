"""Static SASS of the grouped MoE kernels without a GPU: instructions in the K loop (the longest backward-branch
loop body) and in total, registers and spills, per (target, config, weight layout). Used to pick the decode.

    python scripts/moe_sass.py [--arch 90 120] [--T 16]"""
from __future__ import annotations

import argparse
import json
import re

import triton

from kernelbench.harness import inspector
from kernelbench import registry
from kernelbench.config import get_shape_set
from kernelbench.kernels import moe as KM


def loop_body(sass: str) -> int:
    """Instructions in the largest loop: a branch to an earlier label (SASS offsets in /*0123*/ comments)."""
    lines = [ln for ln in sass.splitlines() if re.search(r"/\*[0-9a-f]{4,}\*/", ln)]
    offs = [int(re.search(r"/\*([0-9a-f]{4,})\*/", ln).group(1), 16) for ln in lines]
    best = 0
    for ln, off in zip(lines, offs):
        m = re.search(r"BRA[^`]*`?\(?\.L_x_(\d+)|BRA .*?(0x[0-9a-f]+)", ln)
        tgt = None
        if m and m.group(2):
            tgt = int(m.group(2), 16)
        if tgt is not None and tgt < off:
            best = max(best, sum(1 for o in offs if tgt <= o <= off))
    return best


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--arch", type=int, nargs="*", default=[90, 120])
    ap.add_argument("--T", type=int, default=16)
    ap.add_argument("--op", default="moe_experts")
    ap.add_argument("--cfg", action="append", default=[],
                    help="JSON config delta over the default (repeatable); replaces the built-in list, PAIR64 only")
    ap.add_argument("--dump", default="", help="write each kernel's SASS to DUMP_<n>.sass")
    a = ap.parse_args()
    dumped = 0
    registry.load_builtin()
    spec, impl = registry.get_op(a.op), registry.get_impl(a.op, "triton")
    params = next(p for p in spec.shape_cases(get_shape_set("flash-tp8")) if p["T"] == a.T and not p.get("hash"))
    base = impl.default_config(params)
    cfgs = [dict(base, BN_UP=bu, BN_DOWN=bd, DECODE=dec, num_warps=w) for bu, bd, dec, w in
            ((32, 32, "fp8", 4), (64, 64, "fp8_asm", 4), (64, 64, "fp8", 4), (64, 64, "fp8_asm", 8))]
    if a.cfg:
        cfgs = [dict(base, **json.loads(c)) for c in a.cfg]
    real_prepare = KM.prepare_experts
    for pair in (True,) if a.cfg else (False, True):
        for cfg in cfgs:
            wrapped = registry.Impl(impl.op, impl.name, (lambda **kw: impl.fn(**real_prepare(kw))) if pair else impl.fn)
            launches = [ln for ln in inspector.capture_impl(wrapped, spec, params, cfg)
                        if ln.name.split(":")[-1] in ("_grouped_gemm_kernel",)]
            for arch in a.arch:
                for ln in launches:
                    src, target, options, _, _ = inspector._bind(ln, arch)
                    ck = triton.compile(src, target=target, options=options.__dict__)
                    sass = inspector.cubin_sass(ck.asm["cubin"])
                    if a.dump:
                        with open(f"{a.dump}_{dumped}.sass", "w") as out:
                            out.write(sass)
                        dumped += 1
                    n = sum(1 for ln2 in sass.splitlines() if re.search(r"/\*[0-9a-f]{4,}\*/", ln2))
                    reg = re.search(r"REG:(\d+)", sass)
                    stack = re.search(r"STACK:(\d+)", sass)
                    smem = ck.metadata.shared
                    delta = {k: v for k, v in cfg.items() if base.get(k) != v}
                    print(f"sm_{arch} {'pair64' if pair else 'official'} {ln.name.split(':')[-1]:22s} BN {cfg['BN_UP']}/{cfg['BN_DOWN']} "
                          f"{cfg['DECODE']:8s} w{cfg['num_warps']} {delta}: loop {loop_body(sass):5d}  total {n:5d}  smem {smem} "
                          f"REG {reg.group(1) if reg else '?'} STACK {stack.group(1) if stack else '?'}", flush=True)


if __name__ == "__main__":
    main()
