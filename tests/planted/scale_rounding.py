"""Planted bug: act_quant_fp8 whose UE8M0 scale rounds log2(amax / 448) to the NEAREST integer
instead of up. Whenever it rounds down, amax / s exceeds 448 and the largest values of the group
saturate: codes and scales both differ from the reference. (A kernel using `rint` where it meant
`ceil`, or exp2(round(log2(x))), does this.) The fp32-scale format is right."""
import torch

from kernelbench.registry import register_impl


@register_impl("act_quant_fp8", "planted_scale")
def act_quant_fp8(x, group=128, scale_fmt="ue8m0", config=None):
    M, K = x.shape
    xg = x.float().view(M, K // group, group)
    amax = xg.abs().amax(-1).clamp_min(1e-4)
    if scale_fmt == "ue8m0":
        s = torch.exp2(torch.round(torch.log2(amax / 448.0)))            # BUG: round instead of ceil
    else:
        s = amax / 448.0
    q = (xg / s[..., None]).clamp(-448.0, 448.0).to(torch.float8_e4m3fn)
    return q.view(M, K), s.float()
