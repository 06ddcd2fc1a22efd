"""A CPU model of the sm_90 fp8 tensor-core adder, run through the shared expert, to explain a verify miss.

Model: the products of e4m3 codes are exact; each k32 QGMMA step adds its 32 products and the running accumulator
after aligning them to the largest exponent among them and truncating each below BITS bits under it (DeepSeek-V3's
report: about 14 bits kept on Hopper). The 128-deep block's partial then takes both block scales in full fp32, as
fp8_linear's tiles do. PROMOTE 32 (kernels/linear.py fp8_dot) restarts the adder at zero every 32 products and adds
each partial in full fp32.

Session 46: the H200 verify failed shared_expert / triton at T=2, D=F=128, "outliers", seed 2104100 with rel_fro
0.02569; this model gives 0.02571 / 0.02564 at 12 / 13 bits (0.00228 at 14), and 0.0023 / 0.0007 with PROMOTE 32.
    python scripts/qgmma_accumulation_model.py [--bits 13] [--examples 40]
"""
from __future__ import annotations

import argparse

import torch

import kernelbench.ops  # noqa: F401  (registers the ops)
from kernelbench.reference import moe as R
from kernelbench.reference.precision import compute_dtype
from kernelbench.reference.quant import act_quant_fp8
from kernelbench.registry import get_op

FAILING = ({"T": 2, "D": 128, "F": 128}, "outliers", 2104100)


def adder_sum(addends: torch.Tensor, bits: int) -> torch.Tensor:
    """(..., n) float64 addends -> (...,) their sum, each truncated below `bits` bits under the largest exponent."""
    top = torch.floor(torch.log2(addends.abs().amax(-1, keepdim=True).clamp_min(1e-300)))
    ulp = torch.exp2(top - bits)
    return (torch.trunc(addends / ulp) * ulp).sum(-1)


def qgmma_linear(x: torch.Tensor, w: torch.Tensor, ws: torch.Tensor, bits: int, promote: int) -> torch.Tensor:
    """fp8_linear (x bf16 (M, K), w e4m3 (N, K), ws e8m0 (N/128, K/128)) through the modelled adder -> bf16."""
    q, s = act_quant_fp8(x)
    M, K = q.shape
    N = w.shape[0]
    qd, wd, wsd = q.double(), w.double(), ws.float().double()
    out = torch.zeros(M, N, dtype=torch.float64)
    for kb in range(K // 128):
        prod = qd[:, None, kb * 128:(kb + 1) * 128] * wd[None, :, kb * 128:(kb + 1) * 128]   # (M, N, 128), exact
        block = torch.zeros(M, N, dtype=torch.float64)
        run = torch.zeros(M, N, dtype=torch.float64)
        for c in range(0, 128, 32):
            if promote and c % promote == 0 and c:
                block, run = block + run.float().double(), torch.zeros_like(run)
            run = adder_sum(torch.cat([run[..., None], prod[..., c:c + 32]], -1), bits)
        block = block + run.float().double()
        out += block.float().double() * (s[:, kb].double()[:, None] * wsd[torch.arange(N) // 128, kb][None, :])
    return out.to(torch.bfloat16)


def shared_rel_fro(params: dict, values: str, seed: int, bits: int, promote: int) -> float:
    spec = get_op("shared_expert")
    inp = spec.make_inputs(params, torch.Generator().manual_seed(seed), "cpu", values)
    with compute_dtype(torch.float64):
        ref = spec.reference(**inp).double()
        g = qgmma_linear(inp["x"], inp["w1"], inp["s1"], bits, promote).double()
        u = qgmma_linear(inp["x"], inp["w3"], inp["s3"], bits, promote).double()
        a = R.swiglu(g, u, inp["swiglu_limit"]).to(torch.bfloat16)
        y = qgmma_linear(a, inp["w2"], inp["s2"], bits, promote).double()
    return ((y - ref).norm() / ref.norm()).item()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bits", type=int, default=13)
    ap.add_argument("--examples", type=int, default=40)
    args = ap.parse_args()
    bound = get_op("shared_expert").tolerance(FAILING[0])["y"].rel_fro
    print(f"bits {args.bits}; the failing example {FAILING}: rel_fro " + ", ".join(
        f"PROMOTE {p} {shared_rel_fro(*FAILING, args.bits, p):.5f}" for p in (0, 32)) + f" (bound {bound:.5f})")
    gen = torch.Generator().manual_seed(7)
    for values in ("normal", "outliers"):
        got = {0: [], 32: []}
        for i in range(args.examples):
            params = {"T": int(torch.randint(1, 7, (1,), generator=gen)),
                      "D": 128 * int(torch.randint(1, 3, (1,), generator=gen)),
                      "F": 128 * int(torch.randint(1, 3, (1,), generator=gen))}
            for p in got:
                got[p].append(shared_rel_fro(params, values, 500 + i, args.bits, p))
        for p, v in got.items():
            v.sort()
            print(f"{values:9s} PROMOTE {p:2d}: rel_fro median {v[len(v) // 2]:.2e} max {v[-1]:.2e}, "
                  f"over the bound {sum(x > bound for x in v)} of {len(v)}")


if __name__ == "__main__":
    main()
