"""Op specs: the MoE layer (reference/moe.py): gate, routed FP4 experts, FP8 shared expert, whole layer.

Params: T tokens, D hidden, E routed experts, El local experts, offset = first local expert,
F moe_inter_dim, K top-k, V vocab (hash routing table rows), hash (route by token id), rs route_scale.
The hash table is drawn with V = min(vocab, 8192) rows (the op reads only the rows of the batch's token
ids; drawing 129280 random rows costs seconds). Cost counts the bytes of the experts a batch touches: with
K distinct uniform picks of E per token, each expert is untouched with probability (1 - K/E)^T, so El * (1 - (1 - K/E)^T) local experts are read.
A hash layer's scores need only the gate rows of the experts its table names (score routing: all E; Routing).
That expectation is the shape's cost (list, roofline, scaling). A timed run counts what its own inputs route to
(instance_cost): at one token the expectation is 0.75 of 32 local experts, while one draw reads 0, 1 or more.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from hypothesis import strategies as st

from kernelbench.config import ShapeSet, divide
from kernelbench.ops.quant import act_values, fp4_weight, fp8_weight
from kernelbench.reference import moe as R
from kernelbench.registry import Cost, OpSpec, Tolerance, register_op
from kernelbench.harness.testing import randn

LIMIT_SWIGLU = 10.0


def _cases(ss: ShapeSet, hash_too: bool = True, shared_slice: bool = False) -> list[dict]:
    """`shared_slice`: one more case per T with the TP rank's slice of the shared expert (F / TP, when it is a
    multiple of 128: kernelbench/decoder/model.py shared_split), the decoder's MoE at TP > 1."""
    c, tp = ss.config, ss.tp
    El = divide(c.n_routed_experts, tp)
    rank = min(3, tp - 1)                    # an interior rank: offsets must be honoured
    out = []
    for T in ss.batches:
        for h in ((False, True) if hash_too else (False,)):
            out.append({"T": T, "D": c.dim, "E": c.n_routed_experts, "El": El, "offset": rank * El,
                        "F": c.moe_inter_dim, "K": c.n_activated_experts, "V": min(c.vocab_size, 8192), "hash": h,
                        "rs": c.route_scale})
        if shared_slice and tp > 1 and c.moe_inter_dim % (128 * tp) == 0:
            out.append({**out[-1], "hash": False, "shared": True, "Fs": c.moe_inter_dim // tp})
    return out


def _strategy():
    @st.composite
    def draw(d):
        E = d(st.sampled_from([4, 8, 16]))
        El = d(st.sampled_from([E, E // 2, E // 4]))
        return {"T": d(st.integers(1, 6)), "D": d(st.sampled_from([128, 256])), "E": E, "El": El,
                "offset": d(st.sampled_from([0, E - El])), "F": d(st.sampled_from([128, 256])),
                "K": d(st.integers(1, min(3, E))), "V": 64, "hash": d(st.booleans()),
                "rs": d(st.sampled_from([1.0, 1.5, 2.5]))}
    return draw()


def shared_dim(p) -> int:
    """The shared expert's inner dimension: F, or Fs (a TP rank's slice of it: kernelbench/decoder/model.py
    shared_split, where each rank runs F / TP of it inside its routed launches)."""
    return p.get("Fs", p["F"])


def _shared_bytes(p) -> int:
    return 3 * shared_dim(p) * p["D"] + 3 * (shared_dim(p) // 128) * (p["D"] // 128)


def _with_shared(strategy, always: bool = False):
    """An expert op's strategy with the optional shared expert drawn (`always`: moe_layer's), whole or as the slice
    of F a TP rank runs (Fs = F / 2 at these sizes)."""
    @st.composite
    def draw(d):
        p = d(strategy)
        if always or d(st.booleans()):
            p["shared"] = True
            if p["F"] >= 256 and d(st.booleans()):
                p["Fs"] = p["F"] // 2
        return p
    return draw()


def _reached(p) -> float:
    """The chance that a batch of T tokens, each picking K distinct of E experts uniformly, routes to a given expert."""
    return 1.0 - (1.0 - p["K"] / p["E"]) ** p["T"]


def touched_experts(p) -> float:
    """Expected number of distinct local experts a batch of T tokens reads."""
    return p["El"] * _reached(p)


@dataclass(frozen=True)
class Routing:
    """What a batch's routing makes an MoE op read: `local`, the distinct local experts its tokens route to (their
    FP4 weights), and `gate_rows`, the rows of the gate weight its scores need: every expert's for score routing
    (the top-k looks at all of them), only the routed experts' for hash routing (the table picks them; the weights
    are the softmax of those K scores)."""
    local: float
    gate_rows: float


def expected_routing(p) -> Routing:
    """The expectation over uniform routing (the shape's cost: list, roofline, scaling)."""
    return Routing(local=touched_experts(p), gate_rows=p["E"] * _reached(p) if p.get("hash") else p["E"])


def local_experts_routed(indices: torch.Tensor, offset: int, El: int) -> int:
    """How many distinct local experts (offset .. offset + El - 1) `indices` (T, K) route to: the experts whose
    weights a call on these inputs must read."""
    local = indices[(indices >= offset) & (indices < offset + El)]
    return int(torch.unique(local).numel())


def routing_of(inputs: dict) -> torch.Tensor:
    """The (T, K) expert indices of an MoE op's inputs: given (moe_experts), or the reference gate's (moe_routed,
    moe_layer: the kernel's own gate may swap experts at a near tie, see moe_gate's tolerance)."""
    if isinstance(inputs.get("indices"), torch.Tensor):
        return inputs["indices"]
    return R.moe_gate(inputs["x"], inputs["weight"], inputs.get("bias"), inputs.get("tid2eid"), inputs["token_ids"],
                      inputs["topk"], inputs["route_scale"])[1]


def routing_read(p, indices: torch.Tensor) -> Routing:
    """The Routing of these (T, K) indices."""
    every = int(torch.unique(indices).numel())
    return Routing(local=local_experts_routed(indices, p["offset"], p["El"]),
                   gate_rows=every if p.get("hash") else p["E"])


def _routed_instance(cost):
    """An MoE op's instance cost: `cost` with what these inputs route to instead of the expectation (at one token
    the expectation is 0.75 local experts of 32, while a draw touches 0 or 1 or more)."""
    def of_inputs(p, inputs):
        return cost(p, routing_read(p, routing_of(inputs)))
    return of_inputs


def _gate_work(p, r: Routing) -> Cost:
    """The gate's own work inside any MoE op: the scores (a D-long dot each, then sqrt-softplus, bias, top-k: ~8
    flops) of every expert (score routing) or of the K the table names (hash), and the reads beyond x: the gate rows
    and the bias, or the gate rows and the batch's table rows."""
    scores = p["T"] * (p["K"] if p.get("hash") else p["E"])
    return Cost(flops=2.0 * scores * p["D"] + 8 * scores,
                bytes=2 * r.gate_rows * p["D"] + (4 * p["T"] * p["K"] if p.get("hash") else 4 * p["E"]))


def _gate_cost(p, r: Routing | None = None) -> Cost:
    g = _gate_work(p, r or expected_routing(p))
    return Cost(flops=g.flops, bytes=g.bytes + 2 * p["T"] * p["D"] + 12 * p["T"] * p["K"])     # + x, w and idx


def _gate_inputs(p, gen, values):
    T, D, E, K = p["T"], p["D"], p["E"], p["K"]
    x = act_values((T, D), gen, "normal" if values == "ties" else values, 128, "fp8")
    w = randn((E, D), gen, scale=D ** -0.5)
    bias = torch.randn(E, generator=gen) * 0.1
    if values == "ties":                      # pairs of experts with identical scores: tie-break by index
        w[1::2] = w[0::2][: E // 2]
        bias[1::2] = bias[0::2][: E // 2]
    token_ids = torch.randint(0, p["V"], (T,), generator=gen)
    tid2eid = None
    if p["hash"]:
        tid2eid = torch.stack([torch.randperm(E, generator=gen)[:K] for _ in range(p["V"])]).to(torch.int32)
        bias = None
    return {"x": x, "weight": w, "bias": bias, "tid2eid": tid2eid, "token_ids": token_ids, "topk": K,
            "route_scale": p["rs"]}


def _routing(p, gen):
    T, E, K = p["T"], p["E"], p["K"]
    idx = torch.stack([torch.randperm(E, generator=gen)[:K] for _ in range(T)])           # (T, K) distinct
    w = torch.rand((T, K), generator=gen) + 0.05
    return w / w.sum(-1, keepdim=True) * p["rs"], idx.to(torch.int64)


def _expert_weights(p, gen, prefix=""):
    El, D, F = p["El"], p["D"], p["F"]
    w1, s1 = fp4_weight(F, D, gen, El)
    w3, s3 = fp4_weight(F, D, gen, El)
    w2, s2 = fp4_weight(D, F, gen, El)
    return {"w1": w1, "s1": s1, "w3": w3, "s3": s3, "w2": w2, "s2": s2}


def _shared_weights(p, gen):
    D, F = p["D"], shared_dim(p)
    w1, s1 = fp8_weight(F, D, gen)
    w3, s3 = fp8_weight(F, D, gen)
    w2, s2 = fp8_weight(D, F, gen)
    return {"w1": w1, "s1": s1, "w3": w3, "s3": s3, "w2": w2, "s2": s2}


def _to(d, device):
    return {k: (v.to(device) if isinstance(v, torch.Tensor) else v) for k, v in d.items()}


def _x_values(shape, gen, values):
    # x * 4: pre-activations ~N(0, 16), so the swiglu clamp at 10 is hit on a few % of elements.
    return (act_values(shape, gen, values, 128, "fp8").float() * 4).to(torch.bfloat16)


# ---- moe_gate -----------------------------------------------------------------------------------------------
def _gate_make(p, gen, device, values):
    return _to(_gate_inputs(p, gen, values), device)


def _gate_tol(p):
    why = ("scores: fp32 logits (accumulation order differs from the reference over D) through softplus/sqrt "
           "and one normalization: ~1e-6 relative. indices: a kernel in fp32 can swap two experts whose "
           "biased scores differ by less than ~1e-6 of their size (exact ties are broken by index in both): "
           "allow 1% of entries.")
    return {"weights": Tolerance(atol=1e-5, rtol=1e-4, max_mismatch_frac=0.02, why=why),
            "indices": Tolerance(atol=0, rtol=0, max_mismatch_frac=0.01, why=why)}


register_op(OpSpec(
    name="moe_gate", family="moe", reference=R.moe_gate, make_inputs=_gate_make, cases=_cases,
    batch_key="T",
    strategy=_strategy,
    cost=_gate_cost, instance_cost=_routed_instance(_gate_cost),
    tolerance=_gate_tol, outputs=("weights", "indices"), value_modes=("normal", "outliers", "ties"),
    doc="sqrtsoftplus scores, top-k of score + bias (or tid2eid for hash layers), weights normalized * route_scale."))


# ---- moe_experts --------------------------------------------------------------------------------------------
def _experts_make(p, gen, device, values):
    x = _x_values((p["T"], p["D"]), gen, values)
    w, idx = _routing(p, gen)
    d = {"x": x, "weights": w, "indices": idx, **_expert_weights(p, gen), "expert_offset": p["offset"],
         "swiglu_limit": LIMIT_SWIGLU}
    if p.get("shared"):     # the optional shared expert (whole, or a TP rank's slice: Fs)
        d.update({f"shared_{k}": v for k, v in _shared_weights(p, gen).items()})
    return _to(d, device)


def _expert_bytes(p):
    return 3 * p["F"] * p["D"] // 2 + 3 * p["F"] * p["D"] // 32


def _experts_cost(p, r: Routing | None = None):
    """`r`: what the batch routes to (default: the expectation)."""
    frac = p["El"] / p["E"]
    sh = bool(p.get("shared"))              # + the shared expert (whole or a TP slice) when the case carries it
    touched = (r or expected_routing(p)).local
    return Cost(flops=2.0 * p["T"] * p["K"] * frac * 3 * p["F"] * p["D"] + sh * 6.0 * p["T"] * shared_dim(p) * p["D"],
                bytes=touched * _expert_bytes(p) + 2 * p["T"] * p["D"] + 12 * p["T"] * p["K"]
                + 4 * p["T"] * p["D"] + sh * _shared_bytes(p))


_ROW_FLIP_FRAC = 0.25
_ROW_FLIP = (" With outlier activations one SwiGLU value can dominate a token's W2 input; when that value sits "
             "at an e4m3 rounding boundary (kernel fp32 vs reference fp64) its code flips by 2^-3 and the whole "
             "output row of that token moves by a few percent (H200 verify, 2026-11-29: T=5, K=1, 52 of 640 "
             "elements 1-7% off, rel_fro 3.4e-3). So up to a quarter of the elements may miss the elementwise "
             "bound; the Frobenius bound, which a wrong expert, scale or routing weight breaks by orders of "
             "magnitude, is the real check.")


def _experts_tol(p):
    if p.get("shared"):                     # + the FP8 shared expert: its bounds (the layer's without the gate)
        return _shared_tol(p)
    why = ("Same fp8 activation codes and fp4 weights; differences: fp32 accumulation order (~1e-6), the "
           "bf16 rounding of the W1/W3 outputs and of the SwiGLU product (kernel fp32 vs fp64 reference can "
           "land on different sides: 2^-8), which can flip an e4m3 code of the W2 input at a tie (one step, "
           "2^-3 of one element out of F, ~2^-3/sqrt(F) of a row), and the bf16 expert outputs. Elementwise "
           "2^-6 with a floor, 1% allowed outside, Frobenius 2^-7.")
    return {"y": Tolerance(atol=2e-3, rtol=2 ** -6, rel_fro=2 ** -7, max_mismatch_frac=_ROW_FLIP_FRAC,
                           why=why + _ROW_FLIP)}


register_op(OpSpec(
    name="moe_experts", family="moe", reference=R.moe_experts, make_inputs=_experts_make,
    batch_key="T",
    cases=lambda ss: _cases(ss, hash_too=False), strategy=lambda: _with_shared(_strategy()), cost=_experts_cost,
    instance_cost=_routed_instance(_experts_cost),
    tolerance=_experts_tol,
    outputs=("y",), value_modes=("normal", "outliers", "large", "boundary"),
    doc="Routed FP4 experts of this rank: W1/W3, clamp, SwiGLU, routing weight, W2, fp32 combine."))


# ---- shared_expert ------------------------------------------------------------------------------------------
def _shared_make(p, gen, device, values):
    x = _x_values((p["T"], p["D"]), gen, values)
    return _to({"x": x, **_shared_weights(p, gen), "swiglu_limit": LIMIT_SWIGLU}, device)


_HOPPER_FP8 = ("Measured on an H200 (2026-11-29, the removed scripts/bench_quant_moe.py; now `kernelbench bench fp8_linear`): fp8_linear vs an fp32 reference has "
               "rel_fro 5.6e-4..8.6e-4 (the fp8 tensor-core dot accumulates each 128-deep block with reduced "
               "precision, cf. DeepSeek-V3's note on Hopper FP8 accumulation; the bf16-operand FP4 path is ~1e-6), "
               "which flips bf16 roundings of g/u and then e4m3 codes of the SwiGLU product; over three GEMMs the "
               "shared expert measured rel_fro 3.1e-3..4.4e-3. Outputs have rms ~16 at Flash shapes with these "
               "inputs (~5 at CPU test sizes): atol 0.25, rtol 2^-6, 2% outside, Frobenius 2^-6.")


def _shared_tol(p):
    return {"y": Tolerance(atol=0.25, rtol=2 ** -6, rel_fro=2 ** -6, max_mismatch_frac=_ROW_FLIP_FRAC,
                           why=_HOPPER_FP8 + _ROW_FLIP + " Seen for the shared expert too (H200 verify, "
                               "2026-11-29: T=3, 'large' values, 19 of 384 elements in one row, rel_fro 7.4e-3).")}


register_op(OpSpec(
    name="shared_expert", family="moe", reference=R.shared_expert, make_inputs=_shared_make,
    batch_key="T",
    cases=lambda ss: [{"T": T, "D": ss.config.dim, "F": ss.config.moe_inter_dim} for T in ss.batches],
    strategy=lambda: st.fixed_dictionaries({"T": st.integers(1, 6), "D": st.sampled_from([128, 256]),
                                            "F": st.sampled_from([128, 256])}),
    cost=lambda p: Cost(flops=6.0 * p["T"] * p["F"] * p["D"],
                        bytes=3 * p["F"] * p["D"] + 3 * (p["F"] // 128) * (p["D"] // 128) + 4 * p["T"] * p["D"]),
    tolerance=_shared_tol, outputs=("y",), value_modes=("normal", "outliers", "large", "boundary"),
    doc="FP8 shared expert with the same clamped SwiGLU, bf16 out."))


# ---- moe_routed ---------------------------------------------------------------------------------------------
def _routed_make(p, gen, device, values):
    g = _gate_inputs(p, gen, "normal" if values == "ties" else values)
    g["x"] = (g["x"].float() * 4).to(torch.bfloat16)
    d = {**g, **_expert_weights(p, gen), "expert_offset": p["offset"], "swiglu_limit": LIMIT_SWIGLU}
    if p.get("shared"):     # the optional shared expert (whole, or a TP rank's slice: Fs)
        d.update({f"shared_{k}": v for k, v in _shared_weights(p, gen).items()})
    return _to(d, device)


def _routed_cost(p, r: Routing | None = None):
    r = r or expected_routing(p)
    e, g = _experts_cost(p, r), _gate_work(p, r)
    return Cost(flops=e.flops + g.flops, bytes=e.bytes + g.bytes)


def _routed_tol(p):
    if p.get("shared"):
        return _layer_tol(p)
    why = ("The routed experts' bounds (moe_experts) with the gate inside: a near-tie swap of one expert (see moe_gate) "
           "changes a whole row, so Frobenius 2^-5 (moe_layer's). The fp8 tensor-core accumulation error of the two "
           "GEMMs does not shrink with |y| (see shared_expert), so the elementwise floor scales with the output's rms "
           "(2^-6 of it): H200 bench 2026-12-02, Flash TP8 T=1, rel_fro 9.3e-3 with 26% of the elements beyond "
           "atol 2e-3 + rtol 2^-6 |y| alone, identical for impl triton and triton_parts (moe_gate + moe_experts).")
    return {"y": Tolerance(atol=2e-3, rtol=2 ** -6, rel_fro=2 ** -5, atol_rms=2 ** -6,
                           max_mismatch_frac=_ROW_FLIP_FRAC, why=why + _ROW_FLIP)}


register_op(OpSpec(
    name="moe_routed", family="moe", reference=R.moe_routed, make_inputs=_routed_make,
    cases=lambda ss: _cases(ss, shared_slice=True), batch_key="T",
    strategy=lambda: _with_shared(_strategy()), cost=_routed_cost,
    instance_cost=_routed_instance(_routed_cost), tolerance=_routed_tol, outputs=("y",),
    value_modes=("normal", "outliers"),
    doc="Gate + this rank's routed experts (+ the shared expert, optional), fp32 partial: the TP decoder's MoE."))


# ---- moe_layer ----------------------------------------------------------------------------------------------
def _layer_make(p, gen, device, values):
    return _routed_make({**p, "shared": True}, gen, device, values)


def _layer_cost(p, r: Routing | None = None):
    r = r or expected_routing(p)
    e, g = _experts_cost({**p, "shared": False}, r), _gate_work(p, r)
    return Cost(flops=e.flops + g.flops + 6.0 * p["T"] * shared_dim(p) * p["D"],
                bytes=r.local * _expert_bytes(p) + 3 * shared_dim(p) * p["D"] + g.bytes + 4 * p["T"] * p["D"])


def _layer_tol(p):
    why = (_HOPPER_FP8 + " The gate runs inside: a near-tie swap of one expert (see moe_gate) changes a whole row, "
           "so up to 3% of elements may fall outside and Frobenius 2^-5. Measured on the H200: 2.0e-3..4.0e-3.")
    return {"y": Tolerance(atol=0.25, rtol=2 ** -6, rel_fro=2 ** -5, max_mismatch_frac=_ROW_FLIP_FRAC,
                           why=why + _ROW_FLIP)}


register_op(OpSpec(
    name="moe_layer", family="moe", reference=R.moe_layer, make_inputs=_layer_make, cases=_cases,
    batch_key="T",
    strategy=lambda: _with_shared(_strategy(), always=True), cost=_layer_cost,
    instance_cost=_routed_instance(_layer_cost), tolerance=_layer_tol, outputs=("y",),
    value_modes=("normal", "outliers"),
    doc="Gate + routed experts of this rank + shared expert, bf16 out: the MoE performance goal's op."))
