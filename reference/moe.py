"""The MoE layer (SPEC section 3.6): gate, routed FP4 experts, FP8 shared expert.

Letters: T tokens, D hidden, E routed experts, El experts on this rank, F moe_inter_dim, K top-k.

Rounding points follow DeepSeek's model.py: each expert GEMM returns bf16 (w1/w3 outputs are bf16
before the fp32 SwiGLU), the SwiGLU product is cast to bf16 and fp8 act-quantized (group 128) before
W2, each expert's bf16 output is summed into an fp32 y. Routing-weight order: descending score,
ties to the lower expert index (a stable sort), so kernels can be compared index by index.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from kernelbench.reference.linear import check_tensor, fp4_linear, fp8_linear
from kernelbench.reference.precision import acc


def gate_scores(x, weight):
    """sqrt(softplus(x @ Wg^T)) in acc precision, (T, E)."""
    return F.softplus(acc(x) @ acc(weight).T).sqrt()


def log_gate_scores(logits):
    """log(sqrt(softplus(l))), finite for every finite logit. The routing weights are normalised in this
    log domain: w_i = exp(ls_i - max ls) / sum_j exp(ls_j - max ls). Where DeepSeek's `s / s.sum()` is
    defined the two are the same function; when every selected score underflows (logits below about
    -104 in fp32: found by `kernelbench verify` with outlier activations) theirs is 0/0 = NaN and this is
    the limit it tends to."""
    return 0.5 * torch.where(logits > 20, torch.log(logits.clamp_min(20)),
                             torch.where(logits < -15, logits, torch.log(F.softplus(logits.clamp(-15, 20)))))


def moe_gate(x, weight, bias, tid2eid, token_ids, topk, route_scale):
    """-> weights (T, K) fp32 summing to route_scale, indices (T, K) int64."""
    check_tensor("x", x, torch.bfloat16, 2)
    check_tensor("weight", weight, torch.bfloat16, 2)
    check_tensor("token_ids", token_ids, torch.int64, 1)
    T, D = x.shape
    E = weight.shape[0]
    if weight.shape[1] != D or token_ids.shape[0] != T:
        raise ValueError(f"moe_gate: x {tuple(x.shape)}, weight {tuple(weight.shape)}, token_ids "
                         f"{tuple(token_ids.shape)} do not fit")
    if not 0 < topk <= E:
        raise ValueError(f"moe_gate: topk={topk} must be in 1..{E}")
    s = gate_scores(x, weight)                                  # (T, E)
    if tid2eid is not None:
        check_tensor("tid2eid", tid2eid, torch.int32, 2)
        if tid2eid.shape[1] != topk:
            raise ValueError(f"moe_gate: tid2eid has {tid2eid.shape[1]} columns, topk={topk}")
        idx = tid2eid[token_ids].long()                         # (T, K)
    else:
        biased = s if bias is None else s + acc(bias)
        idx = torch.sort(biased, dim=-1, descending=True, stable=True).indices[:, :topk]
    ls = log_gate_scores(acc(x) @ acc(weight).T).gather(1, idx)
    w = torch.softmax(ls, dim=-1) * route_scale
    return w.float(), idx.to(torch.int64)


def swiglu(g, u, limit):
    """g, u fp (.., F): silu(min(g, limit)) * clamp(u, -limit, limit)."""
    u = u.clamp(-limit, limit)
    g = g.clamp(max=limit)
    return F.silu(g) * u


def _expert(x, weight, w1, s1, w3, s3, w2, s2, limit):
    """x (n, D) bf16, weight (n, 1) routing weight or None -> (n, D) bf16 (one expert, fp4 or fp8)."""
    lin = fp4_linear if w1.dtype == torch.uint8 else fp8_linear
    g = acc(lin(x, w1, s1))
    u = acc(lin(x, w3, s3))
    a = swiglu(g, u, limit)
    if weight is not None:
        a = acc(weight) * a
    return lin(a.to(torch.bfloat16), w2, s2)


def moe_experts(x, weights, indices, w1, s1, w3, s3, w2, s2, expert_offset, swiglu_limit, shared_w1=None,
                shared_s1=None, shared_w3=None, shared_s3=None, shared_w2=None, shared_s2=None):
    """-> y (T, D) fp32: sum over each token's local selected experts of the expert output. With the shared
    expert's weights (all six, optional: the TP rank that carries the replicated shared expert), + its bf16
    output, so that the all-reduce of the ranks' partials adds it once."""
    check_tensor("x", x, torch.bfloat16, 2)
    check_tensor("weights", weights, torch.float32, 2)
    check_tensor("indices", indices, torch.int64, 2)
    for n, t in (("w1", w1), ("w3", w3), ("w2", w2)):
        check_tensor(n, t, torch.uint8, 3)
    for n, t in (("s1", s1), ("s3", s3), ("s2", s2)):
        check_tensor(n, t, torch.float8_e8m0fnu, 3)
    T, D = x.shape
    El, Fi = w1.shape[0], w1.shape[1]
    if (weights.shape != indices.shape or weights.shape[0] != T or w1.shape != (El, Fi, D // 2)
            or w3.shape != w1.shape or w2.shape != (El, D, Fi // 2)):
        raise ValueError(f"moe_experts: shapes do not fit: x {tuple(x.shape)}, weights {tuple(weights.shape)}, "
                         f"indices {tuple(indices.shape)}, w1 {tuple(w1.shape)}, w3 {tuple(w3.shape)}, w2 {tuple(w2.shape)}")
    y = torch.zeros(T, D, dtype=acc(torch.zeros(())).dtype, device=x.device)
    for le in range(El):
        tok, slot = torch.nonzero(indices == expert_offset + le, as_tuple=True)
        if tok.numel() == 0:
            continue
        out = _expert(x[tok], weights[tok, slot][:, None], w1[le], s1[le], w3[le], s3[le], w2[le], s2[le],
                      swiglu_limit)
        y.index_add_(0, tok, acc(out))
    shared = (shared_w1, shared_s1, shared_w3, shared_s3, shared_w2, shared_s2)
    if any(t is not None for t in shared):
        if any(t is None for t in shared):
            raise ValueError("moe_experts: give all six shared expert tensors (shared_w1 .. shared_s2) or none")
        y = y + acc(shared_expert(x, *shared, swiglu_limit))
    return y.float()


def shared_expert(x, w1, s1, w3, s3, w2, s2, swiglu_limit):
    """x (T, D) bf16, FP8 weights w1/w3 (F, D), w2 (D, F) -> y (T, D) bf16 (no routing weight)."""
    check_tensor("x", x, torch.bfloat16, 2)
    for n, t in (("w1", w1), ("w3", w3), ("w2", w2)):
        check_tensor(n, t, torch.float8_e4m3fn, 2)
    return _expert(x, None, w1, s1, w3, s3, w2, s2, swiglu_limit)


def moe_routed(x, weight, bias, tid2eid, token_ids, topk, route_scale, w1, s1, w3, s3, w2, s2, expert_offset,
               swiglu_limit, shared_w1=None, shared_s1=None, shared_w3=None, shared_s3=None, shared_w2=None,
               shared_s2=None):
    """-> y (T, D) fp32 = moe_experts(x, moe_gate(x)): the gate and this rank's routed experts (+ the shared expert
    when its weights are given: the TP rank that carries it), the fp32 partial a TP rank all-reduces."""
    w, idx = moe_gate(x, weight, bias, tid2eid, token_ids, topk, route_scale)
    return moe_experts(x, w, idx, w1, s1, w3, s3, w2, s2, expert_offset, swiglu_limit, shared_w1, shared_s1,
                       shared_w3, shared_s3, shared_w2, shared_s2)


def moe_layer(x, weight, bias, tid2eid, token_ids, topk, route_scale, w1, s1, w3, s3, w2, s2, expert_offset,
              swiglu_limit, shared_w1, shared_s1, shared_w3, shared_s3, shared_w2, shared_s2):
    """-> y (T, D) bf16 = bf16(routed experts on this rank (fp32) + shared expert)."""
    w, idx = moe_gate(x, weight, bias, tid2eid, token_ids, topk, route_scale)
    y = acc(moe_experts(x, w, idx, w1, s1, w3, s3, w2, s2, expert_offset, swiglu_limit))
    y = y + acc(shared_expert(x, shared_w1, shared_s1, shared_w3, shared_s3, shared_w2, shared_s2, swiglu_limit))
    return y.to(torch.bfloat16)
