"""Static SASS of Triton's own block-scaled dot on the MoE up kernel's tile, without a GPU: a (BN, BM) accumulator
over K blocks of 128 with `tl.dot_scaled(w e2m1 + UE8M0 per 32, x^T e4m3 + UE8M0 per 32, acc)`, the loop-carried
form the grouped kernel cannot have with its per-group FFMA scaling. Prints registers, the K loop's instruction
count and its most frequent instructions, to compare with `scripts/moe_sass.py --T 64 --cfg '{}'` (two weight
matrices per loop there, one here).

    python scripts/moe_dot_scaled_sass.py [--arch 90] [--bn 64] [--bm 16] [--warps 4] [--stages 3]"""
from __future__ import annotations

import argparse
import re
from collections import Counter

import triton
import triton.language as tl
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

from kernelbench.harness.inspector import cubin_sass
from moe_sass import loop_body


@triton.jit
def _scaled_tile_kernel(w_ptr, ws_ptr, x_ptr, xs_ptr, o_ptr, KD: tl.constexpr, BN: tl.constexpr, BM: tl.constexpr):
    rn = tl.arange(0, BN)
    rm = tl.arange(0, BM)
    rb = tl.arange(0, 64)
    rk = tl.arange(0, 128)
    rg = tl.arange(0, 4)
    acc = tl.zeros((BN, BM), dtype=tl.float32)
    for kb in range(KD // 128):
        w = tl.load(w_ptr + rn[:, None] * (KD // 2) + kb * 64 + rb[None, :])          # (BN, 64) packed e2m1
        ws = tl.load(ws_ptr + rn[:, None] * (KD // 32) + kb * 4 + rg[None, :])        # (BN, 4) UE8M0
        xt = tl.load(x_ptr + rm[None, :] * KD + kb * 128 + rk[:, None])               # (128, BM) e4m3
        xs = tl.load(xs_ptr + rm[:, None] * (KD // 32) + kb * 4 + rg[None, :])        # (BM, 4) UE8M0
        acc = tl.dot_scaled(w, ws, "e2m1", xt, xs, "e4m3", acc)
    tl.store(o_ptr + rn[:, None] * BM + rm[None, :], acc)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--arch", type=int, nargs="*", default=[90, 120])
    ap.add_argument("--bn", type=int, default=64)
    ap.add_argument("--bm", type=int, default=16)
    ap.add_argument("--warps", type=int, default=4)
    ap.add_argument("--stages", type=int, default=3)
    ap.add_argument("--kd", type=int, default=4096)
    a = ap.parse_args()
    sig = {"w_ptr": "*u8", "ws_ptr": "*u8", "x_ptr": "*fp8e4nv", "xs_ptr": "*u8", "o_ptr": "*fp32",
           "KD": "constexpr", "BN": "constexpr", "BM": "constexpr"}
    for arch in a.arch:
        src = ASTSource(fn=_scaled_tile_kernel, signature=sig, constexprs={"KD": a.kd, "BN": a.bn, "BM": a.bm})
        ck = triton.compile(src, target=GPUTarget("cuda", arch, 128 if arch == 90 else 32),
                            options={"num_warps": a.warps, "num_stages": a.stages})
        sass = cubin_sass(ck.asm["cubin"])
        reg = re.search(r"REG:(\d+)", sass)
        ops = Counter(re.findall(r"\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_]+(?:\.[A-Z0-9_]+)*)", sass))
        print(f"sm_{arch} BN {a.bn} BM {a.bm} w{a.warps} s{a.stages}: REG {reg.group(1) if reg else '?'}, "
              f"K loop {loop_body(sass)} instructions (one weight matrix), {sum(ops.values())} in all")
        print("   ", ", ".join(f"{k} {v}" for k, v in ops.most_common(12)))


if __name__ == "__main__":
    main()
