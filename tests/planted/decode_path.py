"""Planted bug (a non-default config): fp4_linear whose DECODE="fp8" path reads each 32-group's weight
scale from the neighbouring group (index g ^ 1: an off-by-one in the word decode's scale index). The
default config (DECODE="bf16") runs the real kernel and is right, so verifying only the default misses
it; the "fp8" path is what tuning (and the MoE default) can select."""
import torch

from kernelbench.kernels.linear import fp4_configs, fp4_default, fp4_linear as _real
from kernelbench.reference.linear import fp4_linear as _ref
from kernelbench.registry import register_impl


@register_impl("fp4_linear", "planted_decode", backend="triton", configs=fp4_configs, default_config=fp4_default)
def fp4_linear(x, weight, weight_scale, config=None):
    M, N, K = x.shape[0], weight.shape[0], 2 * weight.shape[1]
    cfg = config or fp4_default({"M": M, "N": N, "K": K})
    if cfg.get("DECODE") == "fp8":
        g = torch.arange(weight_scale.shape[1], device=weight_scale.device) ^ 1     # BUG: the neighbour's scale
        return _ref(x, weight, weight_scale[:, g].contiguous())
    return _real(x, weight, weight_scale, config=cfg)
