"""Planted bug: moe_gate whose top-k breaks exact ties toward the HIGHER expert index (a radix or
bitonic select that scans experts from the top). The contract (reference/moe.py) breaks ties by the
lower index; with tied scores this picks, or orders, the wrong expert."""
import torch

from kernelbench.registry import register_impl


@register_impl("moe_gate", "planted_ties")
def moe_gate(x, weight, bias, tid2eid, token_ids, topk, route_scale, config=None):
    logits = x.float() @ weight.float().t()
    s = torch.nn.functional.softplus(logits).sqrt()
    if tid2eid is not None:
        idx = tid2eid[token_ids].long()
    else:
        biased = s if bias is None else s + bias.float()
        E = biased.shape[-1]
        flipped = torch.sort(biased.flip(-1), dim=-1, descending=True, stable=True).indices[:, :topk]
        idx = E - 1 - flipped                                            # BUG: ties go to the higher index
    w = s.gather(1, idx)
    return (w / w.sum(-1, keepdim=True) * route_scale).float(), idx
