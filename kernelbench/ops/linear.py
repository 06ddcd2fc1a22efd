"""Op specs: block-scaled FP8 / FP4 linear, bf16 linear, grouped wo_a, lm_head (reference/linear.py)."""
from __future__ import annotations

import torch
from hypothesis import strategies as st

from kernelbench.config import ShapeSet, divide
from kernelbench.ops.norm import unique_cases
from kernelbench.ops.quant import act_values, fp4_weight, fp8_dequantised, fp8_weight
from kernelbench.reference import linear as L
from kernelbench.registry import Cost, OpSpec, Tolerance, register_op
from kernelbench.harness.testing import randn


def fp8_linear_shapes(ss: ShapeSet) -> list[tuple[str, int, int]]:
    """(layer, N, K) of every FP8 weight a rank multiplies in a decode step (SPEC section 2, 4)."""
    c, tp = ss.config, ss.tp
    return [("wq_a", c.q_lora_rank, c.dim), ("wkv", c.head_dim, c.dim),
            ("wq_b", divide(c.n_heads, tp) * c.head_dim, c.q_lora_rank),
            ("wo_b", c.dim, divide(c.o_groups, tp) * c.o_lora_rank),
            ("indexer.wq_b", divide(c.index_n_heads, tp) * c.index_head_dim, c.q_lora_rank),
            ("indexer.wq_b (replicated, the decoder's)", c.index_n_heads * c.index_head_dim, c.q_lora_rank),
            ("shared.w1", c.moe_inter_dim, c.dim), ("shared.w2", c.dim, c.moe_inter_dim),
            ("shared.w1 (a TP rank's slice, the decoder's)", divide(c.moe_inter_dim, tp), c.dim),
            ("shared.w2 (a TP rank's slice, the decoder's)", c.dim, divide(c.moe_inter_dim, tp)),
            ("mtp.e_proj", c.dim, c.dim)]


def _linear_tol(p, out="y"):
    K = p["K"]
    why = (f"Kernel and reference see the same e4m3/e2m1 codes and power-of-two scales (products exact); "
           f"they differ by fp32 accumulation order over K={K} (<= ~sqrt(K)*2^-24 relative, random signs) "
           f"and the final bf16 rounding (2^-9 relative, can land on either side: 2^-8). Cancellation near "
           f"zero needs an absolute floor: outputs are O(1) for normal inputs. On Hopper the fp8 MMA (QGMMA) "
           f"accumulates each 128-wide block with ~14 mantissa bits relative to the block's largest partial sum "
           f"(DeepSeek-V3 report, 3.3.2); with outlier activations an output that cancels loses that much "
           f"(measured on the H200: 6 of 192 elements 1-2% off at rel_fro 1.3e-3). Elementwise misses are "
           f"therefore allowed on up to 5% of elements; the Frobenius bound (2^-8) still catches a wrong scale "
           f"or block, which moves rel_fro by orders of magnitude.")
    return {out: Tolerance(atol=1e-3, rtol=2 ** -7, rel_fro=2 ** -8, max_mismatch_frac=5e-2, why=why)}


def _gemm_cost(M, N, K, wbytes_per_elem, scale_bytes, out_bytes=2):
    return Cost(flops=2.0 * M * N * K, bytes=N * K * wbytes_per_elem + scale_bytes + 2 * M * K + out_bytes * M * N)


def _small_mnk():
    return st.fixed_dictionaries({"M": st.integers(1, 5), "N": st.sampled_from([32, 96, 128, 200, 256]),
                                  "K": st.sampled_from([128, 256, 384])})


# ---- fp8_linear --------------------------------------------------------------------------------------------
def _fp8_make(p, gen, device, values):
    x = act_values((p["M"], p["K"]), gen, values, 128, "fp8")
    w, s = fp8_weight(p["N"], p["K"], gen)
    return {"x": x.to(device), "weight": w.to(device), "weight_scale": s.to(device)}


def _fp8_cases(ss):
    return unique_cases([{"M": T, "N": N, "K": K} for _, N, K in fp8_linear_shapes(ss) for T in ss.batches])


register_op(OpSpec(
    name="fp8_linear", family="linear", reference=L.fp8_linear, make_inputs=_fp8_make, cases=_fp8_cases,
    batch_key="M",
    strategy=_small_mnk,
    cost=lambda p: _gemm_cost(p["M"], p["N"], p["K"], 1, -(-p["N"] // 128) * (p["K"] // 128)),
    tolerance=_linear_tol, outputs=("y",), value_modes=("normal", "outliers", "tiny", "large", "boundary"),
    doc="y = act_quant_fp8(x) @ (q * s)^T, 128x128 weight blocks, fp32 accumulation, bf16 out."))


# ---- fp4_linear --------------------------------------------------------------------------------------------
def _fp4_make(p, gen, device, values):
    x = act_values((p["M"], p["K"]), gen, values, 128, "fp8")
    w, s = fp4_weight(p["N"], p["K"], gen)
    return {"x": x.to(device), "weight": w.to(device), "weight_scale": s.to(device)}


def _fp4_cases(ss):
    c = ss.config
    return unique_cases([{"M": T, "N": N, "K": K} for N, K in ((c.moe_inter_dim, c.dim), (c.dim, c.moe_inter_dim))
                   for T in ss.batches])


register_op(OpSpec(
    name="fp4_linear", family="linear", reference=L.fp4_linear, make_inputs=_fp4_make, cases=_fp4_cases,
    batch_key="M",
    strategy=_small_mnk,
    cost=lambda p: _gemm_cost(p["M"], p["N"], p["K"], 0.5, p["N"] * p["K"] // 32),
    tolerance=_linear_tol, outputs=("y",), value_modes=("normal", "outliers", "tiny", "large", "boundary"),
    doc="One routed expert's GEMM: fp8 activations x MXFP4 (e2m1 + UE8M0 per 32) weights, bf16 out."))


# ---- bf16_linear -------------------------------------------------------------------------------------------
def _bf16_make(p, gen, device, values):
    x = act_values((p["M"], p["K"]), gen, values, 128, "fp8")
    w = randn((p["N"], p["K"]), gen, scale=p["K"] ** -0.5)
    return {"x": x.to(device), "weight": w.to(device), "out_dtype": torch.float32}


def _bf16_cases(ss):
    c, tp = ss.config, ss.tp
    shapes = [(c.n_routed_experts, c.dim),                  # gate logits
              (2 * c.head_dim, c.dim), (2 * c.index_head_dim, c.dim),   # ratio-4 compressor wkv / wgate
              (c.head_dim, c.dim),                          # ratio-128 compressor
              (divide(c.index_n_heads, tp), c.dim),         # indexer weights_proj, head-sharded
              (c.index_n_heads, c.dim)]                     # and replicated (the decoder's: kernelbench/decoder/model.py)
    return unique_cases([{"M": T, "N": N, "K": K} for N, K in shapes for T in ss.batches])


def _bf16_tol(p, out="y"):
    """fp32-output GEMM of bf16 operands. The products are exact in fp32 (8 x 8 significand bits), so
    the only error is fp32 accumulation (no output rounding: the output is fp32). Each addition
    rounds by at most u = 2^-24 of the running partial sum s_k, and |s_k| ~ sqrt(k/K) rms(y), so the
    accumulated error is ~ u sqrt(sum_k s_k^2) ~ sqrt(K/2) u rms(y), whatever |y| is: an element that
    cancels (|y| << rms(y), e.g. -2.2 among logits of rms 1e4 in the 'large' value mode) keeps that
    absolute error, which no bound relative to |y| covers. Hence the floor atol_rms = 16 sqrt(K) u
    (about 20x the typical error, room for the tail of the largest of ~1e6 elements and for a
    tensor core's different summation order) on top of atol/rtol for O(1) outputs; rel_fro 1e-5 is
    ~40x the typical sqrt(K/2) u at K = 7168."""
    K = p["K"]
    why = (f"bf16 products exact in fp32; fp32 accumulation over K={K} in another order than the fp64 reference: "
           f"error ~ sqrt(K/2)*2^-24*rms(y) independent of |y| (cancelled elements keep it), hence an absolute "
           f"floor of 16*sqrt(K)*2^-24 = {16 * K ** 0.5 * 2.0 ** -24:.2g} x rms(y); fp32 output, no output rounding.")
    return {out: Tolerance(atol=1e-4, rtol=1e-4, rel_fro=1e-5, max_mismatch_frac=1e-3, why=why,
                           atol_rms=16 * K ** 0.5 * 2.0 ** -24)}


register_op(OpSpec(
    name="bf16_linear", family="linear", reference=L.bf16_linear, make_inputs=_bf16_make, cases=_bf16_cases,
    batch_key="M",
    strategy=lambda: st.fixed_dictionaries({"M": st.integers(1, 5), "N": st.sampled_from([16, 40, 128, 256]),
                                            "K": st.sampled_from([64, 128, 256])}),
    cost=lambda p: Cost(flops=2.0 * p["M"] * p["N"] * p["K"],
                        bytes=2 * p["N"] * p["K"] + 2 * p["M"] * p["K"] + 4 * p["M"] * p["N"]),
    tolerance=_bf16_tol, outputs=("y",), value_modes=("normal", "outliers", "large"),
    doc="y = x @ W^T with bf16 operands, fp32 accumulation and output (gate, compressor, weights_proj)."))


# ---- grouped_wo_a ------------------------------------------------------------------------------------------
def _woa_make(p, gen, device, values):
    """o in the value mode; wo_a as the model holds it, a checkpoint FP8 weight dequantised to bf16 (exact)."""
    o = act_values((p["T"], p["Gl"] * p["I"]), gen, values, 128, "fp8").view(p["T"], p["Gl"], p["I"])
    w = fp8_dequantised(p["O"], p["I"], gen, p["Gl"])
    return {"o": o.to(device), "weight": w.to(device)}


def _woa_cases(ss):
    c = ss.config
    return [{"T": T, "Gl": divide(c.o_groups, ss.tp), "O": c.o_lora_rank, "I": c.heads_per_group * c.head_dim}
            for T in ss.batches]


def _woa_tol(p):
    why = (f"bf16 inputs, fp32 accumulation over I={p['I']} (order differs from the fp64 reference: "
           f"~sqrt(I)*2^-24 relative), then one bf16 rounding (2^-9, either side: 2^-8).")
    return {"z": Tolerance(atol=1e-3, rtol=2 ** -7, rel_fro=2 ** -8, max_mismatch_frac=1e-3, why=why)}


register_op(OpSpec(
    name="grouped_wo_a", family="linear", reference=L.grouped_wo_a, make_inputs=_woa_make, cases=_woa_cases,
    batch_key="T",
    strategy=lambda: st.fixed_dictionaries({"T": st.integers(1, 4), "Gl": st.integers(1, 3),
                                            "O": st.sampled_from([32, 64, 128]), "I": st.sampled_from([64, 256])}),
    cost=lambda p: Cost(flops=2.0 * p["T"] * p["Gl"] * p["O"] * p["I"],
                        bytes=2 * p["Gl"] * p["O"] * p["I"] + 2 * p["T"] * p["Gl"] * (p["I"] + p["O"])),
    tolerance=_woa_tol, outputs=("z",), value_modes=("normal", "outliers"),
    doc="z[:, g] = o[:, g] @ wo_a[g]^T per output group (bf16 weights, as the reference loads wo_a: the checkpoint's "
        "FP8 dequantised; impl triton reads the FP8 codes, kernels/linear.py prepare_wo_a)."))


# ---- lm_head ----------------------------------------------------------------------------------------------
def _head_make(p, gen, device, values):
    x = act_values((p["T"], p["D"]), gen, values, 128, "fp8")
    w = randn((p["V"], p["D"]), gen, scale=p["D"] ** -0.5)
    return {"x": x.to(device), "weight": w.to(device)}


register_op(OpSpec(
    name="lm_head", family="linear", reference=L.lm_head, make_inputs=_head_make,
    batch_key="T",
    cases=lambda ss: [{"T": T, "V": divide(ss.config.vocab_size, ss.tp), "D": ss.config.dim} for T in ss.batches],
    strategy=lambda: st.fixed_dictionaries({"T": st.integers(1, 4), "V": st.sampled_from([50, 128, 300]),
                                            "D": st.sampled_from([64, 256])}),
    cost=lambda p: Cost(flops=2.0 * p["T"] * p["V"] * p["D"],
                        bytes=2 * p["V"] * p["D"] + 2 * p["T"] * p["D"] + 4 * p["T"] * p["V"]),
    tolerance=lambda p: _bf16_tol({"K": p["D"]}, "logits"), outputs=("logits",),
    value_modes=("normal", "outliers", "large"),
    doc="fp32 logits of this rank's vocab shard."))
