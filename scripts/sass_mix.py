"""The SASS instruction mix of an op's kernels without a GPU: for each implementation named, the kernels its call
launches at one Flash TP8 case (the load-time layout applied, as the inspector does), compiled for an sm_90 or sm_120
target, with the opcodes counted (the mnemonic before its first dot). For comparing two forms of the same kernel, e.g.
the wo_a GEMM on bf16 weights and on FP8 codes (docs/perf/h100-2026-12-07-session53.md):

    python scripts/sass_mix.py grouped_wo_a --impl triton --impl triton_bf16 --where T=64 \
        --config '{"BM": 32, "BN": 64, "SPLIT": 4, "num_warps": 8, "num_stages": 3}' --arch 90"""
from __future__ import annotations

import argparse
import collections
import json
import os
import re

os.environ.pop("TRITON_INTERPRET", None)      # the compiler needs real JITFunctions

import triton  # noqa: E402

from kernelbench import registry  # noqa: E402
from kernelbench.harness import inspector  # noqa: E402
from kernelbench.harness.bench import parse_where  # noqa: E402
from kernelbench.harness.devices import SM_LIMITS  # noqa: E402

SHOWN = ("HGMMA", "HMMA", "QGMMA", "LDG", "LDGSTS", "LDS", "LDSM", "STS", "F2FP", "F2F", "I2F", "FMUL", "FFMA",
         "HADD2", "HFMA2", "PRMT", "BAR")
OPCODE = re.compile(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_]*)")


def mix(sass: str) -> collections.Counter:
    return collections.Counter(m.group(1) for m in OPCODE.finditer(sass))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("op")
    ap.add_argument("--impl", action="append", default=[], help="implementation (repeatable; default triton)")
    ap.add_argument("--where", action="append", default=[], help="KEY=V filter of the flash-tp8 cases (first match)")
    ap.add_argument("--config", default=None, help="JSON config (default: the implementation's own choice)")
    ap.add_argument("--arch", type=int, default=90, choices=(90, 120))
    a = ap.parse_args()
    registry.load_builtin()
    spec = registry.get_op(a.op)
    where = parse_where(a.where)
    cases = [c for c in spec.shape_cases("flash-tp8") if all(str(c.get(k)) in v for k, v in where.items())]
    if not cases:
        raise SystemExit(f"{a.op}: no flash-tp8 case matches {a.where}")
    params = cases[0]
    config = json.loads(a.config) if a.config else None
    print(f"{a.op} {params} sm_{a.arch} {config or 'default config'}")
    for name in a.impl or ["triton"]:
        impl = registry.get_impl(a.op, name)
        for launch in inspector.capture_impl(impl, spec, params, config):
            src, target, options, _, _ = inspector._bind(launch, a.arch)
            ck = triton.compile(src, target=target, options=options.__dict__)
            facts = inspector.binary_facts(ck.asm["cubin"], ck.asm["ptx"], a.arch)
            counts = mix(inspector.cubin_sass(ck.asm["cubin"]))
            shown = ", ".join(f"{k} {counts[k]}" for k in SHOWN if counts[k])
            spill = facts["spill_stores"] + facts["spill_loads"]
            regs = facts["usage"].get("REG", 0)
            shared = max(int(ck.metadata.shared), facts["usage"].get("SHARED", 0))
            warps = options.num_warps
            per_sm = SM_LIMITS[a.arch].programs(warps, regs, shared)     # as `kernelbench inspect` counts them
            print(f"  {name} {launch.name.split(':')[-1]}: {regs} registers, {shared} B shared, {spill} B spilled, "
                  f"{per_sm} x {warps} warps an SM, {sum(counts.values())} instructions; {shown}")


if __name__ == "__main__":
    main()
