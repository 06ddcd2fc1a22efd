"""The triton_kernels peer of moe_experts (kernels/peers.py): registered only when its source folder is given,
one-line errors for a wrong folder or release, the load-time weight conversion keeps every value, the routing
glue, the fused SwiGLU (interpreter), and on a GPU the op itself against the reference and under graph capture.

Tests that need the peer's source read KERNELBENCH_TRITON_KERNELS (python/triton_kernels of triton v3.6.0,
never committed: docs/perf/moe.md 'Peer'); without it they skip and say so."""
from __future__ import annotations

import importlib
import os
import subprocess
import sys

import pytest
import torch
import triton
import triton.language as tl

from kernelbench import registry
from kernelbench.kernels import peers
from kernelbench.ops.quant import fp4_weight
from kernelbench.reference import moe as R
from kernelbench.reference.quant import dequant_fp4_weight
from kernelbench.usage import UsageProblem

PEER = os.environ.get(peers.ENV_TRITON_KERNELS)
needs_peer = pytest.mark.skipif(not PEER, reason=f"{peers.ENV_TRITON_KERNELS} is not set: the peer's source is "
                                                  "not on this machine (it is never committed)")


@pytest.fixture
def clean_imports():
    """The test imports a fake triton_kernels: the real one (if imported) is set aside and put back after."""
    path = list(sys.path)
    mine = lambda m: m == "triton_kernels" or m.startswith("triton_kernels.")   # noqa: E731
    saved = {m: sys.modules.pop(m) for m in list(sys.modules) if mine(m)}
    yield
    sys.path[:] = path
    for m in [m for m in sys.modules if mine(m)]:
        del sys.modules[m]
    sys.modules.update(saved)


# ---- registration and errors ------------------------------------------------------------------------------
def test_not_registered_without_the_path(monkeypatch):
    registry.load_builtin()
    ops = ("moe_experts", "moe_layer")
    saved = {op: registry._IMPLS[op].get("triton_kernels") for op in ops}
    for op in ops:
        registry.unregister_impl(op, "triton_kernels")
    monkeypatch.delenv(peers.ENV_TRITON_KERNELS, raising=False)
    try:
        importlib.reload(peers)
        for op in ops:
            assert "triton_kernels" not in registry.impls(op)
            assert "triton" in registry.impls(op)
    finally:
        for op, impl in saved.items():
            if impl is not None:
                registry._IMPLS[op]["triton_kernels"] = impl


@needs_peer
def test_registered_when_the_path_is_given():
    peers.register_triton_kernels(PEER)
    from kernelbench.harness.verify import skip_reason
    for op in ("moe_experts", "moe_layer"):
        impl = registry.get_impl(op, "triton_kernels")
        assert impl.prepare is not None and impl.backend == "cuda"
        assert "needs a GPU" in skip_reason(impl, "cpu")


def test_missing_folder_is_a_one_line_usage_error(tmp_path):
    with pytest.raises(UsageProblem, match="no triton_kernels package there") as e:
        peers.load_triton_kernels(tmp_path / "nowhere")
    assert "\n" not in str(e.value) and peers.ENV_TRITON_KERNELS in str(e.value)


def test_another_release_is_refused(tmp_path, clean_imports):
    (tmp_path / "triton_kernels").mkdir()
    (tmp_path / "triton_kernels" / "__init__.py").write_text("")
    (tmp_path / "VERSION").write_text("v2.0.0\n")
    with pytest.raises(UsageProblem, match=f"v2.0.0.*triton {triton.__version__}"):
        peers.load_triton_kernels(tmp_path)


def test_a_package_without_matmul_ogs_is_refused(tmp_path, clean_imports):
    (tmp_path / "triton_kernels").mkdir()
    (tmp_path / "triton_kernels" / "__init__.py").write_text("")
    with pytest.raises(UsageProblem, match="lacks the matmul_ogs API") as e:
        peers.load_triton_kernels(tmp_path)
    assert "\n" not in str(e.value)


def test_the_cli_says_one_line_for_a_wrong_folder(tmp_path):
    env = {**os.environ, peers.ENV_TRITON_KERNELS: str(tmp_path / "nowhere")}
    r = subprocess.run([sys.executable, "-m", "kernelbench", "list"], env=env, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode != 0
    err = r.stderr.strip().splitlines()
    assert len(err) == 1 and "no triton_kernels package there" in err[0], r.stderr[-2000:]


# ---- scripts/get_triton_kernels_peer.sh (the peer's source from the vLLM wheel), on fake wheels: no network ------
FETCH = os.path.join(os.path.dirname(__file__), "..", "scripts", "get_triton_kernels_peer.sh")


def _fake_wheel(path, files: dict) -> str:
    import zipfile
    whl = path / "vllm-0.17.0-cp38-abi3-manylinux_2_31_x86_64.whl"
    with zipfile.ZipFile(whl, "w") as z:
        for name, text in files.items():
            z.writestr(name, text)
    return str(whl)


def _fetch(wheel: str, dest) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", FETCH, str(dest)], env={**os.environ, "VLLM_WHEEL": wheel}, capture_output=True,
                          text=True, timeout=120)


def test_fetch_script_keeps_only_the_package_and_names_triton_3_6(tmp_path, clean_imports):
    pkg = "vllm/third_party/triton_kernels/"
    wheel = _fake_wheel(tmp_path, {pkg + "__init__.py": "", pkg + "tensor_details/layout.py": "X = 1\n",
                                   "vllm/__init__.py": "", "vllm/third_party/pynvml.py": ""})
    dest = tmp_path / "peer"
    r = _fetch(wheel, dest)
    assert r.returncode == 0, r.stderr
    got = sorted(str(p.relative_to(dest)) for p in dest.rglob("*") if p.is_file())
    assert got == ["VERSION", "triton_kernels/__init__.py", "triton_kernels/tensor_details/layout.py"]
    first = (dest / "VERSION").read_text().splitlines()[0]
    assert peers._release(first) == (3, 6) and "vLLM 0.17.0" in first
    if peers._release(triton.__version__) == (3, 6):        # the loader takes the folder; the fake lacks the API
        with pytest.raises(UsageProblem, match="lacks the matmul_ogs API"):
            peers.load_triton_kernels(dest)


def test_fetch_script_keeps_the_old_copy_when_the_wheel_has_no_package(tmp_path):
    dest = tmp_path / "peer"
    (dest / "triton_kernels").mkdir(parents=True)
    (dest / "triton_kernels" / "__init__.py").write_text("# the copy already there\n")
    r = _fetch(_fake_wheel(tmp_path, {"vllm/__init__.py": ""}), dest)
    assert r.returncode != 0 and "has no vllm/third_party/triton_kernels package" in r.stderr
    assert (dest / "triton_kernels" / "__init__.py").read_text() == "# the copy already there\n"


# ---- the load-time conversion -----------------------------------------------------------------------------
@needs_peer
@pytest.mark.parametrize("target", ["strided", "hopper"])
def test_conversion_keeps_every_value(target):
    tk = peers.load_triton_kernels(PEER)
    g = torch.Generator().manual_seed(1)
    El, D, F = 3, 256, 128
    w1, s1 = fp4_weight(F, D, g, El)
    w3, s3 = fp4_weight(F, D, g, El)
    w2, s2 = fp4_weight(D, F, g, El)
    pe = peers.to_peer_experts(tk, w1, s1, w3, s3, w2, s2, target)
    assert (pe.El, pe.D, pe.F) == (El, D, F)
    v13 = peers.dequant_peer_operand(tk, pe.w13, pe.s13)            # [El, D, 2F]: x @ v13 = interleaved (g, u)
    assert v13.shape == (El, D, 2 * F)
    assert torch.equal(v13[..., 0::2], dequant_fp4_weight(w1, s1).float().mT)
    assert torch.equal(v13[..., 1::2], dequant_fp4_weight(w3, s3).float().mT)
    v2 = peers.dequant_peer_operand(tk, pe.w2, pe.s2)
    assert torch.equal(v2, dequant_fp4_weight(w2, s2).float().mT)
    # and the conversion is not the identity on codes: swapping W1 and W3 changes the operand
    swapped = peers.dequant_peer_operand(tk, *peers._operand(tk, torch.stack((w3, w1), 2).reshape(El, 2 * F, D // 2),
                                                              torch.stack((s3, s1), 2).view(torch.uint8).reshape(El, 2 * F, D // 32),
                                                              target))
    assert not torch.equal(swapped, v13)


# ---- the routing glue -------------------------------------------------------------------------------------
def test_sort_pairs_matches_a_brute_force():
    g = torch.Generator().manual_seed(2)
    T, K, E, El, off = 7, 3, 16, 4, 8
    idx = torch.stack([torch.randperm(E, generator=g)[:K] for _ in range(T)])
    order, inverse, hist = peers.sort_pairs(idx, off, El)
    flat = idx.reshape(-1).tolist()
    local = [i for i, e in enumerate(flat) if off <= e < off + El]
    want = sorted(local, key=lambda i: (flat[i], i))                 # by local expert, stable
    assert order[: len(want)].tolist() == want
    assert sorted(order.tolist()) == list(range(T * K))              # a permutation: non-local pairs at the end
    for pos, i in enumerate(want):
        assert inverse[i] == pos
    assert all(inverse[i] == -1 for i in range(T * K) if i not in local)
    assert hist.tolist() == [sum(1 for e in flat if e == off + j) for j in range(El)]
    assert hist.dtype == order.dtype == inverse.dtype == torch.int32


# ---- the fused activation (interpreter on CPU, compiled on a GPU) -----------------------------------------------
@triton.jit
def _swiglu_probe(acc_ptr, out_ptr, limit, BM: tl.constexpr, BN: tl.constexpr):
    r = tl.arange(0, BM)[:, None]
    acc = tl.load(acc_ptr + r * BN + tl.arange(0, BN)[None, :])
    out = peers._dsv4_swiglu(acc, limit)
    tl.store(out_ptr + r * (BN // 2) + tl.arange(0, BN // 2)[None, :], out)


def test_fused_swiglu_is_the_reference_on_bf16_rounded_inputs():
    device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cpu" and os.environ.get("TRITON_INTERPRET") != "1":
        pytest.skip("needs TRITON_INTERPRET=1 on CPU")
    g = torch.Generator().manual_seed(3)
    acc = (torch.randn(16, 64, generator=g) * 6).to(device)          # |v| > 10 on a few % of elements: the clamps
    out = torch.empty(16, 32, device=device)
    _swiglu_probe[(1,)](acc, out, 10.0, BM=16, BN=64)
    gate = acc[:, 0::2].bfloat16().double()
    lin = acc[:, 1::2].bfloat16().double()
    want = R.swiglu(gate, lin, 10.0)
    torch.testing.assert_close(out.double().cpu(), want.cpu(), rtol=1e-6, atol=1e-6)
    assert bool((acc[:, 1::2].abs() > 10).any())                     # the clamp was exercised


# ---- the op on a GPU --------------------------------------------------------------------------------------
def _case(K, T=16):
    return {"T": T, "D": 512, "E": 32, "El": 8, "offset": 8, "F": 256, "K": K, "V": 64, "hash": False, "rs": 1.5}


def _peer_output_within_tolerance(op, p):
    """The peer's output for op at params p on the GPU, asserted within the op's tolerance of the
    reference (run on the CPU copies). -> (inputs, output)."""
    from kernelbench.harness.testing import error_stats, passes
    peers.register_triton_kernels(PEER)
    spec, impl = registry.get_op(op), registry.get_impl(op, "triton_kernels")
    inp = spec.make_inputs(p, torch.Generator().manual_seed(0), "cuda", "normal")
    y = impl.fn(**impl.prepared(inp))
    ref = spec.reference(**{k: (v.cpu() if isinstance(v, torch.Tensor) else v) for k, v in inp.items()})
    tol = spec.tolerance(p)["y"]
    st = error_stats(y.cpu(), ref, tol)
    assert passes(st, tol), st
    return inp, y


@pytest.mark.gpu
@needs_peer
@pytest.mark.parametrize("K", [6, 1])
def test_peer_matches_the_reference(K):
    p = _case(K)
    inp, y = _peer_output_within_tolerance("moe_experts", p)
    assert y.dtype == torch.float32 and y.shape == (p["T"], p["D"])
    # a token none of whose experts is local gets exactly zero (K=1 takes the kernel's zero-fill path)
    idx = inp["indices"].cpu()
    none_local = ~((idx >= 8) & (idx < 16)).any(-1)
    assert bool(none_local.any()) and bool((y.cpu()[none_local] == 0).all())


@pytest.mark.gpu
@needs_peer
def test_peer_is_graph_capturable_and_deterministic():
    peers.register_triton_kernels(PEER)
    spec, impl = registry.get_op("moe_experts"), registry.get_impl("moe_experts", "triton_kernels")
    inp = impl.prepared(spec.make_inputs(_case(6), torch.Generator().manual_seed(0), "cuda", "normal"))
    impl.fn(**inp)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = impl.fn(**inp)
    inp["x"].copy_(torch.randn_like(inp["x"].float()).bfloat16())
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(out, impl.fn(**inp))


@pytest.mark.gpu
@needs_peer
@pytest.mark.parametrize("hash_routing", [False, True])
def test_peer_layer_matches_the_reference(hash_routing):
    p = {**_case(6), "hash": hash_routing}
    _, y = _peer_output_within_tolerance("moe_layer", p)
    assert y.dtype == torch.bfloat16 and y.shape == (p["T"], p["D"])
