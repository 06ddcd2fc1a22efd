"""Planted bug (format boundary): fp8_simulate whose UE8M0 scale is 2^(floor(log2(amax/448)) + 1)
instead of 2^ceil(log2(amax/448)). The two agree unless amax/448 is exactly a power of two (amax =
448 * 2^k); there the scale is twice too large. The maximum still dequantizes exactly (224 * 2s), and
normal values keep their 3 mantissa bits, so only values that fall into the e4m3 subnormal range
lose a bit: the bug shows only with amax == 448 * 2^k and subnormals in the same group."""
import torch

from kernelbench.reference.quant import FP8_AMAX_FLOOR, round_e4m3
from kernelbench.registry import register_impl


@register_impl("fp8_simulate", "planted_boundary")
def fp8_simulate(x, group=64, scale_fmt="ue8m0", config=None):
    M, N = x.shape
    xg = x.double().view(M, N // group, group)
    amax = xg.abs().amax(-1).clamp_min(FP8_AMAX_FLOOR)
    if scale_fmt == "ue8m0":
        s = torch.exp2(torch.floor(torch.log2(amax / 448.0)) + 1)     # BUG: floor + 1 instead of ceil
    else:
        s = (amax.float() / 448.0).double()
    q = round_e4m3((xg / s[..., None]).clamp(-448.0, 448.0))
    return (q.double() * s[..., None]).to(torch.bfloat16).view(M, N)
