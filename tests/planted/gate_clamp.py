"""Planted bug (a semantic rule): the shared expert's SwiGLU clamps the gate from below too
(clamp(g, -limit, limit) instead of min(g, limit)). It changes an output only where g < -limit, by
silu(-limit) * u ~ 4.5e-4 * u: far inside the op's tolerance on random inputs; the probe
'swiglu_gate_below_limit' makes it dominate."""
import torch
import torch.nn.functional as F

from kernelbench.reference.linear import fp8_linear
from kernelbench.reference.precision import acc
from kernelbench.registry import register_impl


@register_impl("shared_expert", "planted_gate_clamp")
def shared_expert(x, w1, s1, w3, s3, w2, s2, swiglu_limit, config=None):
    g = acc(fp8_linear(x, w1, s1))
    u = acc(fp8_linear(x, w3, s3)).clamp(-swiglu_limit, swiglu_limit)
    g = g.clamp(-swiglu_limit, swiglu_limit)                      # BUG: the gate is clamped above only
    return fp8_linear((F.silu(g) * u).to(torch.bfloat16), w2, s2)
