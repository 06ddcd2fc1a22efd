"""Compile every shipped config of the quant / linear / MoE kernels for sm_120 on the CPU (no GPU needed) and
report shared memory, registers, stack (spills) and tensor-core instructions. Exit status 1 on any config over
101,376 bytes of shared memory or with a non-zero stack frame.
    python scripts/check_sm120_quant_moe.py [arch=120]
"""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile

import triton
from triton.backends.compiler import GPUTarget

from kernelbench.kernels import linear as KL
from kernelbench.kernels import moe as KM

SMEM_LIMIT = 101_376
BIN = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin")
P = "*"


def compile_report(fn, sig, consts, num_warps, num_stages, arch):
    # real launches specialise 16-divisible pointers and sizes (vectorized loads): say so, or the report is
    # pessimistic (scalar loads) and misses the 128-register cap ptxas applies to some 8-warp tiles
    attrs = {(i,): [["tt.divisibility", 16]] for i, (n, t) in enumerate(sig.items())
             if t.startswith("*") or (t == "i32" and n in ("M", "N", "K", "sxm", "swg", "swn", "som", "PART_STRIDE"))}
    k = triton.compile(triton.compiler.ASTSource(fn=fn, signature=sig, constexprs=consts, attrs=attrs),
                       target=GPUTarget("cuda", arch, 32), options={"num_warps": num_warps, "num_stages": num_stages})
    with tempfile.NamedTemporaryFile(suffix=".cubin", delete=False) as f:
        f.write(k.asm["cubin"])
    res = subprocess.run([os.path.join(BIN, "cuobjdump"), "-res-usage", f.name], capture_output=True, text=True).stdout
    line = next(l for l in res.splitlines() if "REG:" in l)
    vals = {kv.split(":")[0]: int(kv.split(":")[1]) for kv in line.split() if ":" in kv and kv.split(":")[1].isdigit()}
    sass = subprocess.run([os.path.join(BIN, "nvdisasm"), f.name], capture_output=True, text=True).stdout
    mma = sorted({w.split(".")[0] for w in sass.split() if w.startswith(("HMMA", "QMMA", "HGMMA", "QGMMA"))})
    os.unlink(f.name)
    return k.metadata.shared, vals["REG"], vals["STACK"], mma


def gemm_sig(kind):
    base = {"M": "i32", "N": "i32", "K": "i32", "KB_SPLIT": "constexpr", "BM": "constexpr", "BN": "constexpr",
            "SPLIT": "constexpr", "RNE_FIX": "constexpr"}
    if kind == "fp8":
        return KL._fp8_linear_kernel, {"x_ptr": "*bf16", "sx_ptr": "*u8", "w_ptr": "*fp8e4nv", "ws_ptr": "*u8",
                                       "out_ptr": "*bf16", "part_ptr": "*fp32", "cnt_ptr": "*i32", **base, "sxm": "i32",
                                       "QUANT": "constexpr", "REDUCE": "constexpr", "HW_CVT": "constexpr"}
    if kind == "fp4":
        return KL._fp4_gemm_kernel, {"x_ptr": "*bf16", "sx_ptr": "*u8", "w_ptr": "*u8", "ws_ptr": "*u8",
                                     "out_ptr": "*fp32", **base, "FP8_DOT": "constexpr", "DOT_UPCAST": "constexpr"}
    if kind == "fp4_fp8":
        return KL._fp4_gemm_kernel, {"x_ptr": "*fp8e4nv", "sx_ptr": "*fp32", "w_ptr": "*u8", "ws_ptr": "*u8",
                                     "out_ptr": "*fp32", **base, "FP8_DOT": "constexpr", "DOT_UPCAST": "constexpr"}
    return KL._bf16_gemm_kernel, {"x_ptr": "*bf16", "w_ptr": "*bf16", "out_ptr": "*fp32", "M": "i32", "N": "i32",
                                  "K": "i32", "G": "i32", "sxm": "i32", "sxg": "i32", "swg": "i32", "swn": "i32",
                                  "som": "i32", "sog": "i32", "PART_STRIDE": "i32", "KB_SPLIT": "constexpr",
                                  "BM": "constexpr", "BN": "constexpr", "BK": "constexpr", "SPLIT": "constexpr",
                                  "OUT_BF16": "constexpr", "DOT_UPCAST": "constexpr", "RNE_FIX": "constexpr"}


def main(arch: int = 120) -> int:
    bad = 0
    rows = []
    for kind, tiles in (("fp8", KL.FP8_TILES), ("fp4", KL.FP4_TILES), ("fp4_fp8", KL.FP4_TILES), ("bf16", KL.BF16_TILES)):
        fn, sig = gemm_sig(kind)
        for bm, bn, w in tiles:
            for st in (2, 3, 4):
                c = {"KB_SPLIT": 8, "BM": bm, "BN": bn, "SPLIT": 2, "RNE_FIX": False, "DOT_UPCAST": False,
                     "FP8_DOT": kind == "fp4_fp8", "QUANT": True, "REDUCE": True, "HW_CVT": True,
                     "BK": 128, "OUT_BF16": False}
                c = {k: v for k, v in c.items() if k in sig}
                rows.append((kind, (bm, bn, w, st), *compile_report(fn, sig, c, w, st, arch)))
    up_sig = {"x_ptr": "*bf16", "sx_ptr": "*i32", "rw_ptr": "*fp32", "sorted_ptr": "*i32", "start_ptr": "*i32", "w1_ptr": "*u8",
              "s1_ptr": "*u8", "w3_ptr": "*u8", "s3_ptr": "*u8", "a_ptr": "*bf16", "limit": "fp32", "D": "constexpr",
              "F": "constexpr", "K": "constexpr", "BM": "constexpr", "BN": "constexpr", "FP8_DOT": "constexpr",
              "DOT_UPCAST": "constexpr", "RNE_FIX": "constexpr", "ASM": "constexpr"}
    down_sig = {"a_ptr": "*bf16", "sa_ptr": "*i32", "sorted_ptr": "*i32", "start_ptr": "*i32", "w2_ptr": "*u8", "s2_ptr": "*u8",
                "ybuf_ptr": "*fp32", "D": "constexpr", "F": "constexpr", "BM": "constexpr", "BN": "constexpr",
                "FP8_DOT": "constexpr", "DOT_UPCAST": "constexpr", "RNE_FIX": "constexpr", "ASM": "constexpr"}
    # DECODE "fp8" (kernels/moe.py moe_configs): activations arrive as e4m3 codes + fp32 scales
    fp8_types = {"x_ptr": "*fp8e4nv", "sx_ptr": "*fp32", "a_ptr": "*fp8e4nv", "sa_ptr": "*fp32"}
    for fp8, asm in ((False, False), (True, False), (True, True)):
        us = {k: fp8_types.get(k, t) if fp8 else t for k, t in up_sig.items()}
        ds = {k: fp8_types.get(k, t) if fp8 else t for k, t in down_sig.items()}
        tag = ("_fp8asm" if asm else "_fp8") if fp8 else ""
        for bm, bu, bd, w in KM.MOE_TILES:
            for st in (2, 3):
                rows.append(("moe_up" + tag, (bm, bu, w, st), *compile_report(
                    KM._moe_up_kernel, us, {"D": 4096, "F": 2048, "K": 6, "BM": bm, "BN": bu, "FP8_DOT": fp8,
                                            "ASM": asm, "DOT_UPCAST": False, "RNE_FIX": False}, w, st, arch)))
                rows.append(("moe_down" + tag, (bm, bd, w, st), *compile_report(
                    KM._moe_down_kernel, ds, {"D": 4096, "F": 2048, "BM": bm, "BN": bd, "FP8_DOT": fp8,
                                              "ASM": asm, "DOT_UPCAST": False, "RNE_FIX": False}, w, st, arch)))
    for kind, cfg, smem, reg, stack, mma in rows:
        flag = smem > SMEM_LIMIT or stack > 0
        bad += flag
        print(f"{'BAD ' if flag else 'ok  '}{kind:13s} BM,BN,warps,stages={cfg} shared={smem} regs={reg} stack={stack} {mma}")
    print(f"{len(rows)} configs, {bad} over the limits")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]) if len(sys.argv) > 1 else 120))
