"""Peer implementations: external MXFP4 MoE kernels registered beside ours, so that one
`kernelbench bench moe_experts --impl triton --impl triton_kernels` run times both (issue 9, item 5).

`triton_kernels`: the `matmul_ogs` grouped GEMM of Triton's own python/triton_kernels package (not on
PyPI; carried as source, never committed). It is registered only when KERNELBENCH_TRITON_KERNELS names the
folder that holds the `triton_kernels` package (python/triton_kernels of the Triton release that matches
the installed triton: v3.6.0 for triton 3.6; docs/perf/moe.md says how to export it). A path that is set
but wrong, or a package of another release, ends in a one-line UsageProblem.

The op contract is kept (docs/OPS.md, moe_experts): official inputs in, y [T, D] fp32 out, both GEMM inputs
fp8 act-quantised (group 128, UE8M0). On sm_90 the peer multiplies bf16 activations by MXFP4 weights
(upcast in the kernel; its fp8 x mxfp4 path needs sm_100), so the fp8 quantisation is applied as an exact
bf16 simulation (our fp8_simulate kernel: e4m3 code x power-of-two scale is a bf16 value), and the rounding
points of the reference are kept: g and u rounded to bf16 before the clamped SwiGLU (the fused activation
below), the routing weight applied before the bf16 cast of the W2 input (matmul_ogs `gammas`, applied after
the activation), per-token sum over the local experts in fp32 (matmul_ogs scatter + its masked reduce).

What the peer's time includes: torch routing glue (stable sort, inverse permutation, histogram), the
peer's ragged-metadata kernels, two fp8_simulate launches, the W1|W3 GEMM with the fused SwiGLU, the W2 GEMM
with the scatter and the reduce over top-k. The weight layout (Hopper MXFP4 value swizzle and scale
swizzle, W1 and W3 interleaved into one [El, D, 2F] operand) is made once by `prepare_peer_experts`, outside
the timed region (registry.Impl.prepare).

`moe_layer` impl `triton_kernels`: the peer's routed experts between our Triton gate and our FP8 shared expert
(the peer has neither), so its bench row is a whole layer that differs from ours in the routed experts only.
"""
from __future__ import annotations

import importlib
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import torch
import triton
import triton.language as tl

from kernelbench.kernels.common import INTERPRET, to_bf16
from kernelbench import registry
from kernelbench.registry import register_impl
from kernelbench.usage import UsageProblem

ENV_TRITON_KERNELS = "KERNELBENCH_TRITON_KERNELS"
TESTED_TRITON_KERNELS = "v3.6.0"
_RNE_FIX = tl.constexpr(INTERPRET)   # the interpreter's fp32 -> bf16 cast truncates (kernels/common.py)
SCALE_WARPS = 4            # HopperMXScaleLayout warps: the matmul then runs 4 warps, block_n = 2*4*2*8 = 128


def _release(version: str) -> tuple[int, int] | None:
    m = re.search(r"(\d+)\.(\d+)", version)
    return (int(m.group(1)), int(m.group(2))) if m else None


def load_triton_kernels(path: str | os.PathLike) -> SimpleNamespace:
    """Import the triton_kernels package that lies in `path` (the folder holding `triton_kernels/`) and
    return the parts the peer uses. Raises UsageProblem (one line) when it is missing or of another release."""
    root = Path(path).expanduser()
    pkg = root / "triton_kernels" / "__init__.py"
    where = f"{ENV_TRITON_KERNELS}={path}"
    if not pkg.is_file():
        raise UsageProblem(f"{where}: no triton_kernels package there (expected {pkg}); export python/triton_kernels "
                           f"of the triton {TESTED_TRITON_KERNELS} tag (docs/perf/moe.md, 'Peer')")
    vfile = root / "VERSION"
    if vfile.is_file():
        tag = vfile.read_text().split("\n", 1)[0].strip()
        if _release(tag) is not None and _release(tag) != _release(triton.__version__):
            raise UsageProblem(f"{where}: triton_kernels of {tag} (VERSION) but triton {triton.__version__} is "
                               f"installed; export python/triton_kernels of the matching triton release")
    loaded = sys.modules.get("triton_kernels")
    if loaded is not None and Path(loaded.__file__).resolve().parent != pkg.parent.resolve():
        raise UsageProblem(f"{where}: another triton_kernels is already imported from {loaded.__file__}")
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    try:
        mo = importlib.import_module("triton_kernels.matmul_ogs")
        tensor = importlib.import_module("triton_kernels.tensor")
        layout = importlib.import_module("triton_kernels.tensor_details.layout")
        mx = importlib.import_module("triton_kernels.numerics_details.mxfp")
        api = SimpleNamespace(
            matmul_ogs=mo.matmul_ogs, RoutingData=mo.RoutingData, GatherIndx=mo.GatherIndx,
            ScatterIndx=mo.ScatterIndx, PrecisionConfig=mo.PrecisionConfig, FusedActivation=mo.FusedActivation,
            FnSpecs=mo.FnSpecs, wrap_torch_tensor=tensor.wrap_torch_tensor, convert_layout=tensor.convert_layout,
            FP4=tensor.FP4, make_ragged_tensor_metadata=tensor.make_ragged_tensor_metadata,
            HopperMXValueLayout=layout.HopperMXValueLayout, HopperMXScaleLayout=layout.HopperMXScaleLayout,
            StridedLayout=layout.StridedLayout, upcast_from_mxfp_torch=mx.upcast_from_mxfp_torch, root=root)
    except (ImportError, AttributeError) as e:
        raise UsageProblem(f"{where}: this triton_kernels lacks the matmul_ogs API the peer uses ({type(e).__name__}: "
                           f"{e}); it needs python/triton_kernels of triton {TESTED_TRITON_KERNELS} "
                           f"(installed triton {triton.__version__})") from None
    return api


# ---- the fused activation: DeepSeek's clamped SwiGLU on interleaved (gate, linear) columns ----------------------
@triton.jit(repr=lambda _: "dsv4_swiglu")     # the suffix of the specialised matmul kernel's name (no dots)
def _dsv4_swiglu(acc, limit):
    """acc [BM, BN] fp32 with W1 (gate) at even and W3 (linear) at odd columns -> [BM, BN/2] fp32 =
    silu(min(bf16(g), limit)) * clamp(bf16(u), -limit, limit): the reference rounds both GEMM outputs to bf16."""
    g, u = tl.split(tl.reshape(acc, (acc.shape[0], acc.shape[1] // 2, 2)))
    g = tl.minimum(to_bf16(g, _RNE_FIX).to(tl.float32), limit)
    u = tl.clamp(to_bf16(u, _RNE_FIX).to(tl.float32), -limit, limit)
    return g / (1.0 + tl.exp(-g)) * u


# ---- the load-time layout -------------------------------------------------------------------------------------
@dataclass
class PeerExperts:
    """The routed experts in the peer's layout: w13 / s13 the W1|W3 operand (logical [El, D, 2F], gate and
    linear columns interleaved), w2 / s2 the W2 operand (logical [El, F, D]); triton_kernels Tensors."""
    w13: object
    s13: object
    w2: object
    s2: object
    El: int
    D: int
    F: int
    target: str


def _target(device) -> str:
    """The weight layout for the device: 'hopper' (sm_90 swizzles) or 'strided' (plain, any other device)."""
    if torch.device(device).type == "cuda" and torch.cuda.get_device_capability(device)[0] == 9:
        return "hopper"
    return "strided"


def _operand(tk, codes: torch.Tensor, scales: torch.Tensor, target: str):
    """Official [El, N, K/2] codes + [El, N, K/32] scale bytes (e8m0 as uint8) -> the peer's (value, scale) Tensors of the
    logical [El, K, N] operand, quantised along K (mx axis 1, K contiguous: the transposed view of ours)."""
    value = tk.wrap_torch_tensor(codes.contiguous().mT, dtype=tk.FP4)     # strided inputs (verify) made dense
    scale = tk.wrap_torch_tensor(scales.contiguous().mT)
    if target == "hopper":
        value = tk.convert_layout(value, tk.HopperMXValueLayout, mx_axis=1)
        scale = tk.convert_layout(scale, tk.HopperMXScaleLayout, mx_axis=1, num_warps=SCALE_WARPS)
    return value, scale


def to_peer_experts(tk, w1, s1, w3, s3, w2, s2, target: str) -> PeerExperts:
    El, F, half_d = w1.shape
    w13 = torch.stack((w1, w3), dim=2).reshape(El, 2 * F, half_d)          # row 2f = W1 row f, 2f+1 = W3 row f
    s13 = torch.stack((s1.view(torch.uint8), s3.view(torch.uint8)), dim=2).reshape(El, 2 * F, s1.shape[-1])
    v13, sc13 = _operand(tk, w13, s13, target)
    v2, sc2 = _operand(tk, w2, s2.view(torch.uint8), target)
    return PeerExperts(v13, sc13, v2, sc2, El, 2 * half_d, F, target)


def dequant_peer_operand(tk, value, scale) -> torch.Tensor:
    """The peer operand's values, logical [El, K, N] fp32, through the peer's own un-swizzle and its torch
    upcast (the test that our conversion keeps every value)."""
    codes = value.storage.layout.unswizzle_data(value.storage.data)
    scales = scale.storage.layout.unswizzle_data(scale.storage.data)
    K, N = value.shape[-2], value.shape[-1]
    codes, scales = codes[..., : K // 2, :N], scales[..., : K // 32, :N]
    return tk.upcast_from_mxfp_torch(codes, scales, torch.float32, axis=1)


# ---- the op ---------------------------------------------------------------------------------------------------
def sort_pairs(indices: torch.Tensor, expert_offset: int, El: int):
    """(token, slot) pairs sorted by local expert, stably; pairs of other ranks' experts last. Device-side, no
    host sync (graph-capturable). -> order [T*K] int32 (sorted position -> flat t*K+k), inverse [T*K] int32
    (flat -> sorted position, -1 for a pair that is not local), hist [El] int32 (pairs per local expert)."""
    T, K = indices.shape
    flat = indices.reshape(-1) - expert_offset
    local = (flat >= 0) & (flat < El)
    key = torch.where(local, flat, El)
    order = torch.sort(key, stable=True).indices.to(torch.int32)
    inverse = torch.empty_like(order)
    inverse[order.long()] = torch.arange(T * K, device=order.device, dtype=torch.int32)
    inverse = torch.where(local, inverse, -1)
    hist = torch.zeros(El + 1, dtype=torch.int32, device=indices.device)
    hist.scatter_add_(0, key, torch.ones_like(key, dtype=torch.int32))
    return order, inverse, hist[:El].contiguous()


def _routing(tk, weights, indices, expert_offset: int, El: int):
    """The peer's routing data: ragged metadata over the sorted pairs, gather (token of each sorted row),
    scatter (flat slot of each sorted row; the reduce over top-k skips slots whose inverse is -1), gammas."""
    T, K = indices.shape
    order, inverse, hist = sort_pairs(indices, expert_offset, El)
    rdata = tk.RoutingData(None, hist, El, K, tk.make_ragged_tensor_metadata(hist, T * K))
    gammas = weights.reshape(-1)[order.long()].contiguous()                 # routing weight per sorted row
    return (rdata, tk.GatherIndx(src_indx=order, dst_indx=inverse), tk.ScatterIndx(src_indx=inverse, dst_indx=order),
            gammas)


def run_moe_experts(tk, pe: PeerExperts, x, weights, indices, expert_offset: int, swiglu_limit: float):
    """The op on prepared weights: x [T, D] bf16 -> y [T, D] fp32 (the module docstring lists the steps)."""
    from kernelbench.kernels.quant import fp8_simulate
    swiglu = tk.FnSpecs("kb_dsv4_swiglu", _dsv4_swiglu, ("limit",), reduction_n=2)
    rdata, gather, scatter, gammas = _routing(tk, weights, indices, expert_offset, pe.El)
    xq = fp8_simulate(x, group=128)                       # the W1/W3 input: e4m3 x UE8M0 values, exact in bf16
    a = tk.matmul_ogs(xq, pe.w13, None, rdata, gather_indx=gather, gammas=gammas,
                      fused_activation=tk.FusedActivation(swiglu, (float(swiglu_limit),)),
                      precision_config=tk.PrecisionConfig(weight_scale=pe.s13, out_dtype=torch.bfloat16))
    aq = fp8_simulate(a, group=128)                       # [T*K, F] by sorted position; rows past the local pairs unused
    return tk.matmul_ogs(aq, pe.w2, None, rdata, scatter_indx=scatter,
                         precision_config=tk.PrecisionConfig(weight_scale=pe.s2, out_dtype=torch.float32))


def make_moe_experts(tk):
    def prepare(inputs: dict) -> dict:
        pe = to_peer_experts(tk, *(inputs[k] for k in ("w1", "s1", "w3", "s3", "w2", "s2")),
                             target=_target(inputs["x"].device))
        return {**inputs, "w1": pe, "s1": None, "w3": None, "s3": None, "w2": None, "s2": None}

    def moe_experts(x, weights, indices, w1, s1, w3, s3, w2, s2, expert_offset, swiglu_limit, config=None):
        if x.device.type != "cuda":
            raise UsageProblem("moe_experts/triton_kernels runs on a CUDA GPU only")
        pe = w1 if isinstance(w1, PeerExperts) else prepare(
            {"x": x, "w1": w1, "s1": s1, "w3": w3, "s3": s3, "w2": w2, "s2": s2})["w1"]
        return run_moe_experts(tk, pe, x, weights, indices, expert_offset, swiglu_limit)

    return moe_experts, prepare


def make_moe_layer(experts):
    """moe_layer with the peer's routed experts; the gate and the FP8 shared expert are ours (Triton impls from the
    registry: the peer has no counterpart for them), so a bench row compares whole layers that differ in the experts."""
    def moe_layer(x, weight, bias, tid2eid, token_ids, topk, route_scale, w1, s1, w3, s3, w2, s2, expert_offset,
                  swiglu_limit, shared_w1, shared_s1, shared_w3, shared_s3, shared_w2, shared_s2, config=None):
        gate = registry.get_impl("moe_gate", "triton").fn
        shared = registry.get_impl("shared_expert", "triton").fn
        w, idx = gate(x, weight, bias, tid2eid, token_ids, topk, route_scale)
        y = experts(x, w, idx, w1, s1, w3, s3, w2, s2, expert_offset, swiglu_limit)
        y = y + shared(x, shared_w1, shared_s1, shared_w3, shared_s3, shared_w2, shared_s2, swiglu_limit).float()
        return y.to(torch.bfloat16)
    return moe_layer


def register_triton_kernels(path: str | os.PathLike) -> None:
    tk = load_triton_kernels(path)
    experts, prepare = make_moe_experts(tk)
    layer = make_moe_layer(experts)
    # backend "cuda": it queries torch.cuda, so it has no interpreter path (verify on CPU says "needs a GPU")
    for op, fn in (("moe_experts", experts), ("moe_layer", layer)):
        fn.__module__, fn.__qualname__ = __name__, f"{op}_triton_kernels"
        register_impl(op, "triton_kernels", backend="cuda", deterministic=True, prepare=prepare)(fn)


if os.environ.get(ENV_TRITON_KERNELS):
    register_triton_kernels(os.environ[ENV_TRITON_KERNELS])
