"""A cuBLAS peer for fp8_linear: impl "torch_bf16", so that one bench run times a plain bf16 GEMM beside the
Triton kernel at the same shapes and on the same values. Its `prepare` (outside the timed region) dequantizes
the weight to bf16 and also replaces x by the values act_quant_fp8 would give the GEMM (exact in bf16), so
the timed call is one `torch.nn.functional.linear` (cuBLAS, twice the fp8 weight bytes) and its outputs
are rechecked against the reference like any implementation's. It is the GEMM alone, the activation
quantization left out: a lower bound for a bf16 path, not a replacement for fp8_linear. A measurement
aid, not part of the shipped registry. Load with `kernelbench bench fp8_linear --module scripts/cublas_peer.py`.
"""
from __future__ import annotations

import torch

from kernelbench.reference.linear import dequant_act_fp8
from kernelbench.reference.quant import dequant_fp8_weight
from kernelbench.registry import register_impl


def _bf16_operands(inputs: dict) -> dict:
    return {"x": dequant_act_fp8(inputs["x"]).bfloat16(),
            "weight": dequant_fp8_weight(inputs["weight"], inputs["weight_scale"]).bfloat16()}


@register_impl("fp8_linear", "torch_bf16", backend="torch", prepare=_bf16_operands)
def fp8_linear_torch_bf16(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.linear(x, weight)
