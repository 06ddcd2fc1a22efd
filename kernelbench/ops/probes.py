"""Semantic probes of the SPEC's rules (kernelbench/harness/probes.py), attached to the op specs.

Each probe builds a small input on which one rule decides the output and carries a tolerance derived
for that input. Rules probed:
  SwiGLU (routed and shared experts): gate clamped above only; up clamped on both sides;
  Sinkhorn: the iteration count (1..3) from a non-converged start;
  MoE gate: exact score ties go to the lower expert index; hash layers route by tid2eid, not scores;
  indexer top-k: among equal scores the lower index first;
  sparse attention: the sink in the denominator only (a sink above every score), index -1 masked.
"""
from __future__ import annotations

import torch

from kernelbench import registry
from kernelbench.harness.probes import Probe, attach
from kernelbench.registry import Tolerance

LIMIT = 10.0
_E2M1 = {1.0: 0x2, -1.0: 0xA, 2.0: 0x4, -2.0: 0xC, 4.0: 0x6, -4.0: 0xE}


def _e8m0(shape, exponent: int) -> torch.Tensor:
    return torch.full(shape, 2.0 ** exponent).to(torch.float8_e8m0fnu)


def _fp8_const(shape, value: float) -> torch.Tensor:
    return torch.full(shape, value).to(torch.float8_e4m3fn)


def _fp4_const(shape, value: float) -> torch.Tensor:
    code = _E2M1[value]
    return torch.full(shape[:-1] + (shape[-1] // 2,), code | (code << 4), dtype=torch.uint8)


# ---- SwiGLU ---------------------------------------------------------------------------------------------
# x = 1 everywhere (fp8-exact: code 256 * 2^-8), D = 128; W1 rows all `g1`, W3 rows all `u1`, scale 2^-2: every
# pre-activation is exactly g = 128 * g1 / 4 (resp. u), the same for all F outputs. W2 all ones, scale 2^e2.
def _swiglu_case(g1: float, u1: float, e2: int, T: int = 1, D: int = 128, F: int = 128):
    return {"T": T, "D": D, "F": F, "g1": g1, "u1": u1, "e2": e2}


def _shared_build(p, gen, device):
    T, D, F = p["T"], p["D"], p["F"]
    d = {"x": torch.ones(T, D, dtype=torch.bfloat16),
         "w1": _fp8_const((F, D), p["g1"]), "s1": _e8m0((F // 128, D // 128), -2),
         "w3": _fp8_const((F, D), p["u1"]), "s3": _e8m0((F // 128, D // 128), -2),
         "w2": _fp8_const((D, F), 1.0), "s2": _e8m0((D // 128, F // 128), p["e2"]), "swiglu_limit": LIMIT}
    return {k: (v.to(device) if isinstance(v, torch.Tensor) else v) for k, v in d.items()}


def _experts_build(p, gen, device):
    T, D, F = p["T"], p["D"], p["F"]
    d = {"x": torch.ones(T, D, dtype=torch.bfloat16), "weights": torch.ones(T, 1),
         "indices": torch.zeros(T, 1, dtype=torch.int64),
         "w1": _fp4_const((1, F, D), p["g1"]), "s1": _e8m0((1, F, D // 32), -2),
         "w3": _fp4_const((1, F, D), p["u1"]), "s3": _e8m0((1, F, D // 32), -2),
         "w2": _fp4_const((1, D, F), 1.0), "s2": _e8m0((1, D, F // 32), p["e2"]), "expert_offset": 0,
         "swiglu_limit": LIMIT}
    return {k: (v.to(device) if isinstance(v, torch.Tensor) else v) for k, v in d.items()}


def _gate_below_tol(out):
    why = ("g = -32 < -limit, u = 32 -> clamp 10: silu(-32) * 10 = -4e-12, which the fp8 quantization of the "
           "W2 input flushes to 0 (amax floor 1e-4): y = 0 exactly. A gate also clamped from below gives "
           "silu(-10) * 10 = -4.5e-3 per element and |y| = F * 4.5e-3 = 0.58 at F = 128: atol 1e-3.")
    return lambda p: {out: Tolerance(atol=1e-3, why=why)}


def _clamp_above_tol(out):
    why = ("g = +32 -> min(g, 10) = 10, u = -32 -> clamp -10: h = silu(10) * -10 = -99.995 exact to bf16/e4m3 "
           "rounding (2^-4 relative per element, the same in kernel and reference); y = F * h * 2^-7 = -100. "
           "A missing clamp on either side gives -320: rtol 2^-5.")
    return lambda p: {out: Tolerance(atol=1e-3, rtol=2 ** -5, why=why)}


def _swiglu_probes(build, out):
    return (Probe("swiglu_gate_below_limit", "SwiGLU: the gate is clamped above only (never from below)",
                  _swiglu_case(-1.0, 1.0, 0), build, _gate_below_tol(out)),
            Probe("swiglu_clamp_above_and_up_below", "SwiGLU: gate clamped above at the limit, up at -limit",
                  _swiglu_case(1.0, -1.0, -7), build, _clamp_above_tol(out)))


# ---- Sinkhorn -------------------------------------------------------------------------------------------
def _sinkhorn_build(p, gen, device):
    """fn = 0: the mixing logits m are exactly 0, so comb = sinkhorn(base) with base spread over [-6, 6]:
    far from doubly stochastic, each iteration moves comb by O(0.1)."""
    from kernelbench.reference.mhc import HC
    T, D = p["T"], p["D"]
    g = torch.Generator().manual_seed(7)
    base = torch.zeros((2 + HC) * HC)
    base[2 * HC:] = torch.linspace(-6, 6, HC * HC)[torch.randperm(HC * HC, generator=g)]
    d = {"h": torch.randn(T, HC, D, generator=g).to(torch.bfloat16), "fn": torch.zeros((2 + HC) * HC, HC * D),
         "base": base, "scale": torch.ones(3), "iters": p["iters"], "eps": 1e-6, "norm_eps": 1e-6}
    return {k: (v.to(device) if isinstance(v, torch.Tensor) else v) for k, v in d.items()}


def _sinkhorn_tol(spec):
    def tol(p):
        t = dict(spec.tolerance(p))
        t["comb"] = Tolerance(atol=1e-5, rtol=1e-4,
                              why="m = 0 exactly; comb = fp32 softmax and 2 * iters normalizations of 16 values "
                                  "in [0, 1] (~1e-6); one iteration more or less moves entries by > 1e-2")
        return t
    return tol


# ---- MoE gate -------------------------------------------------------------------------------------------
def _gate_ties_build(p, gen, device):
    """Every expert's weight row identical and no bias: all scores tie; the top-k is experts 0..K-1."""
    T, D, E, K = p["T"], p["D"], p["E"], p["K"]
    g = torch.Generator().manual_seed(11)
    x = torch.randn(T, D, generator=g).to(torch.bfloat16)
    w = (torch.randn(1, D, generator=g) * D ** -0.5).to(torch.bfloat16).expand(E, D).contiguous()
    d = {"x": x, "weight": w, "bias": torch.zeros(E), "tid2eid": None, "token_ids": torch.zeros(T, dtype=torch.int64),
         "topk": K, "route_scale": 1.5}
    return {k: (v.to(device) if isinstance(v, torch.Tensor) else v) for k, v in d.items()}


def _gate_hash_build(p, gen, device):
    """Hash layer: tid2eid routes each token to the experts with the LOWEST scores (a kernel that picks by
    score picks the others); the bias is given too and must not matter."""
    T, D, E, K, V = p["T"], p["D"], p["E"], p["K"], p["V"]
    g = torch.Generator().manual_seed(13)
    x = torch.randn(T, D, generator=g).to(torch.bfloat16)
    w = (torch.randn(E, D, generator=g) * D ** -0.5 * 4).to(torch.bfloat16)
    logits = x.double() @ w.double().T
    token_ids = torch.arange(T, dtype=torch.int64) % V
    tid2eid = torch.zeros(V, K, dtype=torch.int32)
    for t in range(T):
        tid2eid[token_ids[t]] = torch.argsort(logits[t])[:K].to(torch.int32)
    d = {"x": x, "weight": w, "bias": torch.linspace(1.0, -1.0, E), "tid2eid": tid2eid, "token_ids": token_ids,
         "topk": K, "route_scale": 2.5}
    return {k: (v.to(device) if isinstance(v, torch.Tensor) else v) for k, v in d.items()}


def _gate_tol(p):
    why = ("indices must match exactly (the rule decides them, no near-ties); weights: fp32 logits through "
           "softplus/sqrt and a K-term normalization, ~1e-6 relative")
    return {"weights": Tolerance(atol=1e-5, rtol=1e-4, why=why), "indices": Tolerance(exact=True, why=why)}


# ---- indexer top-k --------------------------------------------------------------------------------------
def _indexer_ties_build(p, gen, device):
    """Every key of a token the same row: all its S4 scores are equal; the top-k is keys 0..K-1 in order."""
    from kernelbench.ops.indexer import _topk_inputs
    d = _topk_inputs(p, gen, "cpu", "normal")
    k = d["k_cache"]
    ok = ~torch.isnan(k[..., 0])
    for b in range(k.shape[0]):
        n = int(ok[b].sum())
        if n:
            k[b, :n] = k[b, 0]
    return {kk: (v.to(device) if isinstance(v, torch.Tensor) else v) for kk, v in d.items()}


def _indexer_ties_tol(spec):
    def tol(p):
        t = dict(spec.tolerance(p))
        t["indices"] = Tolerance(exact=True, why="all scores of a token are equal bit for bit (one key row): "
                                                 "the rule 'among equal scores the lower index first' decides "
                                                 "every index")
        return t
    return tol


# ---- sparse attention -----------------------------------------------------------------------------------
_ATTN = {"T": 2, "Hl": 8, "Dh": 128, "R": 64, "W": 8, "kind": "csa", "ratio": 8, "topk": 8, "ctx": 40,
         "ragged": False, "rope": True, "lengths": False}


def _attn_sink_build(p, gen, device):
    """sink = 40 for every head, above every score (|s| <~ 5 for N(0,1) q and kv at scale Dh^-0.5): the sink
    takes all but e^-35 of the softmax mass, so o ~ 1e-14; a kernel that drops it, or adds the sink's
    weight to the numerator, gives o = O(1)."""
    from kernelbench.ops.attention import _attn_inputs
    d = _attn_inputs(p, torch.Generator().manual_seed(17), "cpu", "normal")
    d["sink"] = torch.full_like(d["sink"], 40.0)
    return {k: (v.to(device) if isinstance(v, torch.Tensor) else v) for k, v in d.items()}


def _attn_mask_build(p, gen, device):
    """Every selected slot -1 except the lowest valid one (cache row 0): o = kv_0 * sigmoid(s_0 - sink)
    (sink -2: the row dominates). A kernel that reads a -1 slot reads another row (or the NaN rows the op
    spec leaves where a token must not read); one that masks index 0 too returns 0."""
    from kernelbench.ops.attention import _attn_inputs
    d = _attn_inputs(p, torch.Generator().manual_seed(19), "cpu", "normal")
    idx = d["indices"]
    keep = torch.where(idx >= 0, idx, torch.full_like(idx, 1 << 30)).min(dim=1, keepdim=True).values
    d["indices"] = torch.where(idx == keep, idx, torch.full_like(idx, -1))
    d["sink"] = torch.full_like(d["sink"], -2.0)
    return {k: (v.to(device) if isinstance(v, torch.Tensor) else v) for k, v in d.items()}


def _attn_sink_tol(p):
    why = ("|o| <= max|kv| * n * e^-(40 - max s) < 1e-10; the same kernel without the sink gives |o| ~ 0.1..3: "
           "atol 1e-6 (no relative part: the reference is ~0)")
    return {"o": Tolerance(atol=1e-6, why=why)}


def _attach_all() -> None:
    ops = {s.name: s for s in registry.ops()}
    if "shared_expert" in ops:
        attach(ops["shared_expert"], *_swiglu_probes(_shared_build, "y"))
    if "moe_experts" in ops:
        attach(ops["moe_experts"], *_swiglu_probes(_experts_build, "y"))
    if "mhc_pre" in ops:
        spec = ops["mhc_pre"]
        attach(spec, *(Probe(f"sinkhorn_iters_{n}", f"Sinkhorn: exactly {n} iteration(s) from a non-converged start",
                             {"T": 2, "D": 16, "iters": n}, _sinkhorn_build, _sinkhorn_tol(spec)) for n in (1, 2, 3)))
    if "moe_gate" in ops:
        base = {"T": 3, "D": 128, "E": 8, "El": 8, "offset": 0, "F": 128, "K": 3, "V": 64, "rs": 1.5}
        attach(ops["moe_gate"],
               Probe("topk_ties_lower_index", "MoE top-k: exact score ties go to the lower expert index",
                     {**base, "hash": False}, _gate_ties_build, _gate_tol),
               Probe("hash_routing", "hash layers: experts from tid2eid[token_id], not from scores or bias",
                     {**base, "hash": True}, _gate_hash_build, _gate_tol))
    if "indexer_topk" in ops:
        spec = ops["indexer_topk"]
        attach(spec, Probe("topk_ties_lower_index", "indexer top-k: among equal scores the lower index first",
                           {"T": 2, "Hi": 4, "topk": 8, "ctx": 64, "cap": 16, "ragged": False},
                           _indexer_ties_build, _indexer_ties_tol(spec)))
    if "sparse_attention" in ops:
        spec = ops["sparse_attention"]
        attach(spec,
               Probe("sink_above_every_score", "attention sink: in the denominator only, above every score",
                     dict(_ATTN), _attn_sink_build, _attn_sink_tol),
               Probe("masked_slots", "indices -1 are masked (empty window slots)", dict(_ATTN), _attn_mask_build,
                     lambda p, _s=spec: _s.tolerance(p)))


_attach_all()
