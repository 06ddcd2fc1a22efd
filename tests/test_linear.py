"""Linear layers: the block-scaled GEMM references checked against an independent per-block formula,
against the unquantized product, kernels == reference (interpreter, poisoned outputs), bad inputs."""
from __future__ import annotations

import pytest
import torch
import triton
import triton.language as tl
from hypothesis import given, settings

from kernelbench import registry
from kernelbench.kernels.common import INTERPRET
from kernelbench.kernels.quant import act_quant_e4m3, fp4_hi_e4m3, fp4_lo_e4m3

from kernelbench.reference import linear as L
from kernelbench.reference import quant as Q
from _quant_moe_util import check_against_reference, poisoned_empty, spec_and_impl


def registry_impl(op, name):
    from kernelbench import registry
    spec_and_impl(op)
    return registry._IMPLS[op][name]


def _blockwise_fp8(x, w, ws):
    """SPEC: C[m, n] = sum_kb (A_blk . B_blk) * sa[m, kb] * sb[n // 128, kb], codes as plain numbers."""
    q, sa = Q.act_quant_fp8(x, 128)
    M, K = x.shape
    N = w.shape[0]
    out = torch.zeros(M, N, dtype=torch.float64)
    for kb in range(K // 128):
        a = q[:, kb * 128:(kb + 1) * 128].double()
        b = w[:, kb * 128:(kb + 1) * 128].double()
        sb = ws[:, kb].double().repeat_interleave(128)[:N]
        out += (a @ b.T) * sa[:, kb].double()[:, None] * sb[None, :]
    return out


@pytest.mark.parametrize("N", [128, 200])
def test_fp8_linear_reference_is_the_block_formula(N, gen):
    x = (torch.randn(3, 256, generator=gen) * 2).bfloat16()
    q, s = Q.quant_fp8_weight(torch.randn(N, 256, generator=gen) * 0.05)
    want = _blockwise_fp8(x, q, s)
    got = L.fp8_linear(x, q, s)
    assert torch.allclose(got.double(), want, rtol=2 ** -8, atol=1e-6)


def test_fp8_and_fp4_linear_approximate_the_real_product(gen):
    x = torch.randn(4, 512, generator=gen).bfloat16()
    w = torch.randn(256, 512, generator=gen) * 0.05
    exact = x.double() @ w.double().T
    q, s = Q.quant_fp8_weight(w)
    e8 = (L.fp8_linear(x, q, s).double() - exact).norm() / exact.norm()
    p, s4 = Q.quant_fp4_weight(w)
    e4 = (L.fp4_linear(x, p, s4).double() - exact).norm() / exact.norm()
    assert 1e-3 < e8 < 0.05          # 3 mantissa bits on both operands
    assert 0.03 < e4 < 0.25          # 1 mantissa bit on the weight
    assert e8 < e4


def test_fp4_linear_reference_uses_the_code_table_and_low_nibble_first(gen):
    x = torch.randn(2, 128, generator=gen).bfloat16()
    packed = torch.randint(0, 256, (3, 64), generator=gen, dtype=torch.uint8)
    scale = torch.full((3, 4), 2.0 ** -3).to(torch.float8_e8m0fnu)
    table = torch.tensor(Q.E2M1_VALUES, dtype=torch.float64)
    w = torch.empty(3, 128, dtype=torch.float64)
    w[:, 0::2] = table[(packed & 15).long()]
    w[:, 1::2] = table[(packed >> 4).long()]
    xq = L.dequant_act_fp8(x)
    want = (xq.double() @ (w * 2.0 ** -3).T)
    assert torch.allclose(L.fp4_linear(x, packed, scale).double(), want, rtol=2 ** -8, atol=1e-6)


def test_grouped_wo_a_and_lm_head_reference(gen):
    o = torch.randn(3, 2, 64, generator=gen).bfloat16()
    w = torch.randn(2, 32, 64, generator=gen).bfloat16()
    z = L.grouped_wo_a(o, w)
    for g in range(2):
        assert torch.allclose(z[:, g].float(), (o[:, g].float() @ w[g].float().T), rtol=2 ** -8, atol=1e-5)
    logits = L.lm_head(o[:, 0], w[0])
    assert logits.dtype == torch.float32 and logits.shape == (3, 32)


# ---- kernels == reference --------------------------------------------------------------------------------------
@pytest.mark.parametrize("op", ["fp8_linear", "fp4_linear", "bf16_linear", "grouped_wo_a", "lm_head"])
def test_kernel_matches_reference(op, monkeypatch):
    poisoned_empty(monkeypatch)
    spec, _ = spec_and_impl(op)

    @settings(max_examples=4)
    @given(spec.strategy())
    def run(p):
        for values in spec.value_modes[:2]:
            check_against_reference(op, p, values)
    run()


@pytest.mark.parametrize("op", ["fp8_linear", "fp4_linear"])
@pytest.mark.parametrize("cfg", [{"BM": 16, "BN": 32, "SPLIT": 1, "num_warps": 4, "num_stages": 2},
                                 {"BM": 16, "BN": 64, "SPLIT": 3, "num_warps": 4, "num_stages": 3}])
def test_split_k_and_ragged_n(op, cfg, monkeypatch):
    """N not a multiple of the tile, M above one tile, K split unevenly requested (3 -> a divisor)."""
    poisoned_empty(monkeypatch)
    check_against_reference(op, {"M": 17, "N": 200, "K": 384}, "outliers", config=cfg)


@pytest.mark.parametrize("cfg", [{"BM": 16, "BN": 32, "SPLIT": 4, "num_warps": 4, "num_stages": 2},
                                 {"BM": 32, "BN": 64, "SPLIT": 2, "num_warps": 8, "num_stages": 3},
                                 {"BM": 16, "BN": 64, "SPLIT": 1, "num_warps": 4, "num_stages": 2}])
def test_fp8_linear_one_launch_equals_three_launches(cfg, monkeypatch):
    """The first fused kernel (impl triton_v1: act-quant in the K loop, split-K summed by the last program of each
    tile) gives the three-launch path's result bit for bit (same codes, same partials, same summation order), in one launch,
    twice in a row (bit-identical rerun), and leaves every split-K ticket at zero for the next launch."""
    from kernelbench.harness.inspector import capture
    from kernelbench.kernels import linear as KL
    impl = registry_impl("fp8_linear", "triton_v1")
    old = registry_impl("fp8_linear", "triton_3launch")
    monkeypatch.setattr(KL, "PROLOGUE_QUANT_MAX_M", 19)   # this test's M: quantized inside the GEMM
    gen = torch.Generator().manual_seed(3)
    x = (torch.randn(19, 512, generator=gen) * 4).bfloat16()
    x[1, 128:256] = 0                                 # an all-zero group (amax floor)
    x[2, :128] *= 1e-6                                # a tiny group (subnormal e4m3 codes)
    w, s = Q.quant_fp8_weight(torch.randn(200, 512, generator=gen) * 0.05)
    y_new, y_old = impl.fn(x, w, s, config=cfg), old.fn(x, w, s, config=cfg)
    assert torch.equal(y_new, y_old)
    assert torch.equal(impl.fn(x, w, s, config=cfg), y_new)
    assert all(int(t.abs().sum()) == 0 for t in KL._TICKETS.values())
    with capture() as launches:
        impl.fn(x, w, s, config=cfg)
    assert [l.name.split(":")[1] for l in launches] == ["_fp8_linear_kernel"]
    # above the threshold: a quantization pre-pass, then the GEMM with its in-kernel split-K reduction
    monkeypatch.setattr(KL, "PROLOGUE_QUANT_MAX_M", 1)
    assert torch.equal(impl.fn(x, w, s, config=cfg), y_old)
    assert all(int(t.abs().sum()) == 0 for t in KL._TICKETS.values())
    with capture() as launches:
        impl.fn(x, w, s, config=cfg)
    names = [l.name.split(":")[1] for l in launches]
    assert len(names) == 2 and names[-1] == "_fp8_linear_kernel" and "_splitk_reduce_kernel" not in names


@pytest.mark.parametrize("op,params", [("bf16_linear", {"M": 17, "N": 200, "K": 384}),
                                       ("grouped_wo_a", {"T": 3, "Gl": 2, "O": 96, "I": 512})])
def test_bf16_gemm_split_k_reduced_in_one_launch(op, params, monkeypatch):
    """Split K on the bf16 GEMM: the last program of each tile sums the partials in split order (one launch, no
    reduction kernel), matches the reference, reruns bit for bit and leaves the tickets at zero."""
    from kernelbench.harness.inspector import capture
    from kernelbench.kernels import linear as KL
    poisoned_empty(monkeypatch)
    cfg = {"BM": 16, "BN": 32, "SPLIT": 2, "num_warps": 4, "num_stages": 2}
    check_against_reference(op, params, "outliers", config=cfg)
    spec, impl = spec_and_impl(op)
    inputs = spec.make_inputs(params, torch.Generator().manual_seed(1), "cpu", "normal")
    y = impl.fn(**inputs, config=cfg)
    assert torch.equal(impl.fn(**inputs, config=cfg), y)
    assert all(int(t.abs().sum()) == 0 for t in KL._TICKETS.values())
    with capture() as launches:
        impl.fn(**inputs, config=cfg)
    assert [l.name.split(":")[1] for l in launches] == ["_bf16_gemm_kernel"]


def _launch_names(fn):
    from kernelbench.harness.inspector import capture
    with capture() as launches:
        fn()
    return [l.name.split(":")[1] for l in launches]


@pytest.mark.parametrize("params,cfg", [
    ({"M": 1, "N": 200, "K": 512}, {"BM": 1, "BN": 64, "NB": 2, "SPLIT": 2, "num_warps": 4, "num_stages": 1}),
    ({"M": 3, "N": 200, "K": 384}, {"BM": 1, "BN": 32, "NB": 1, "SPLIT": 3, "num_warps": 4, "num_stages": 1}),
    ({"M": 17, "N": 200, "K": 384}, {"BM": 16, "BN": 64, "X_OPERAND": "A", "SPLIT": 3, "num_warps": 4,
                                     "num_stages": 2}),
    ({"M": 17, "N": 200, "K": 512}, {"BM": 16, "BN": 32, "X_OPERAND": "B", "SPLIT": 2, "num_warps": 4,
                                     "num_stages": 2}),
    ({"M": 40, "N": 128, "K": 512}, None)])
def test_fp8_linear_one_launch_at_every_m(params, cfg, monkeypatch):
    """fp8_linear (v2): the FMA GEMV (BM 1, rows beyond one as separate programs) and the tl.dot tile with x as either
    operand, ragged N and M, split K: the reference's result, one launch (x quantized inside, split-K summed by
    the last program of each tile), a bit-identical rerun, every ticket back at zero."""
    from kernelbench.kernels import linear as KL
    poisoned_empty(monkeypatch)
    inp, out, _ = check_against_reference("fp8_linear", params, "outliers", config=cfg, impl_name="triton")
    impl = registry_impl("fp8_linear", "triton")
    kw = {"config": cfg} if cfg else {}
    assert torch.equal(impl.fn(**inp, **kw), out[0])
    assert all(int(t.abs().sum()) == 0 for t in KL._TICKETS.values())
    assert _launch_names(lambda: impl.fn(**inp, **kw)) == ["_fp8_linear_v2_kernel"]


# The MMA tiles' options that change how x and its scales reach the MMA, not the arithmetic: (option, the GEMV's
# refusal, a bad value, the v1 path's refusal: None where v1 takes the option too).
X_PATH_OPTIONS = [({"XQ": "once"}, "XQ 'once' is for the MMA tiles", "XQ='twice'", "PATH 'v1' quantizes x in its own"),
                  ({"PREFETCH": "staged"}, "PREFETCH 'staged' is for the MMA tiles", "PREFETCH='twice'", None),
                  ({"XQ": "once", "PREFETCH": "staged"}, "is for the MMA tiles", None, "is the v2 tiles'")]


@pytest.mark.parametrize("params,cfg", [
    ({"M": 17, "N": 200, "K": 384}, {"BM": 16, "BN": 64, "X_OPERAND": "A", "SPLIT": 3, "num_warps": 4,
                                     "num_stages": 3}),
    ({"M": 40, "N": 128, "K": 512}, {"BM": 32, "BN": 32, "X_OPERAND": "B", "SPLIT": 1, "num_warps": 4,
                                     "num_stages": 3})])
@pytest.mark.parametrize("option,gemv_refusal,bad,v1_refusal", X_PATH_OPTIONS)
def test_fp8_linear_x_paths_equal_per_tile(params, cfg, option, gemv_refusal, bad, v1_refusal, monkeypatch):
    """Config XQ "once" (the launch's programs quantize x once into codes and scales, the tiles read them) and
    PREFETCH "staged" (x through the compiler's load pipeline, the weight-scale byte a step ahead), alone and together:
    the reference's result and bit for bit the default path's (the same act_quant_e4m3 codes into the same MMA in the
    same order), one launch, a bit-identical rerun, the split-K tickets and the three XQ counters back at zero. Each
    is refused for the BM = 1 GEMV and for an unknown value; XQ with PATH "v1" (which would ignore it), where PREFETCH
    "staged" (the v1 tile's scales a step ahead) is v1's own result bit for bit, its codes quantized by the pre-pass
    (M 17, 40 > PROLOGUE_QUANT_MAX_M)."""
    from kernelbench.kernels import linear as KL
    poisoned_empty(monkeypatch)
    other = {**cfg, **option}
    inp, out, _ = check_against_reference("fp8_linear", params, "outliers", config=other, impl_name="triton")
    impl = registry_impl("fp8_linear", "triton")
    assert torch.equal(out[0], impl.fn(**inp, config=cfg))
    assert torch.equal(impl.fn(**inp, config=other), out[0])
    assert all(int(t.abs().sum()) == 0 for t in KL._TICKETS.values())
    assert _launch_names(lambda: impl.fn(**inp, config=other)) == ["_fp8_linear_v2_kernel"]
    gemv = {"BM": 1, "BN": 32, "NB": 1, "SPLIT": 1, "num_warps": 4, "num_stages": 1, **option}
    with pytest.raises(ValueError, match=gemv_refusal):
        impl.fn(inp["x"][:1], inp["weight"], inp["weight_scale"], config=gemv)
    if bad:
        key = next(iter(option))
        with pytest.raises(ValueError, match=bad):
            impl.fn(**inp, config={**cfg, key: "twice"})
    if v1_refusal:
        with pytest.raises(ValueError, match=v1_refusal):
            impl.fn(**inp, config={**other, "PATH": "v1"})
    else:
        v1 = {k: v for k, v in cfg.items() if k != "X_OPERAND"} | {"PATH": "v1"}
        assert torch.equal(impl.fn(**inp, config={**v1, **option}), impl.fn(**inp, config=v1))


@pytest.mark.parametrize("op,params,cfg", [
    ("bf16_linear", {"M": 1, "N": 200, "K": 384}, {"BM": 1, "BN": 64, "NB": 1, "SPLIT": 3, "num_warps": 8,
                                                  "num_stages": 1}),
    ("bf16_linear", {"M": 3, "N": 40, "K": 300}, {"BM": 1, "BN": 32, "NB": 1, "SPLIT": 3, "num_warps": 4,
                                                   "num_stages": 1}),
    ("grouped_wo_a", {"T": 3, "Gl": 2, "O": 96, "I": 512}, {"BM": 1, "BN": 64, "NB": 2, "SPLIT": 2,
                                                             "num_warps": 4, "num_stages": 1}),
    ("lm_head", {"T": 1, "V": 300, "D": 256}, {"BM": 1, "BN": 32, "NB": 2, "SPLIT": 1, "num_warps": 4,
                                               "num_stages": 1})])
def test_bf16_gemv(op, params, cfg, monkeypatch):
    """The bf16 GEMM's FMA GEMV path (BM 1: one row per program, a (BN, NB, 128) weight tile a step), ragged N
    and K, split K reduced in the kernel: the reference's result in one launch."""
    poisoned_empty(monkeypatch)
    inp, _, _ = check_against_reference(op, params, "outliers", config=cfg, impl_name="triton")
    impl = registry_impl(op, "triton")
    kw = {"config": cfg} if cfg else {}
    assert _launch_names(lambda: impl.fn(**inp, **kw)) == ["_bf16_gemm_kernel"]


def test_v2_defaults_and_bad_configs():
    """The v2 defaults: GEMV at M = 1 with NB dividing each split's K blocks and at least 3/4 * 2 programs per
    SM; tensor-core tiles above. A BM between 1 and 16 is refused; an NB that does not divide a split is fitted."""
    from kernelbench.kernels import linear as KL
    for N, K in ((4096, 4096), (1024, 4096), (512, 4096), (4096, 1024), (1024, 1024)):
        c = KL.fp8_v2_default({"M": 1, "N": N, "K": K})
        assert c["BM"] == 1 and (K // 128) % c["SPLIT"] == 0 and (K // 128 // c["SPLIT"]) % c["NB"] == 0
        assert N // c["BN"] * c["SPLIT"] >= min(3 * KL.NUM_SMS_TARGET // 2, N // c["BN"] * K // 128)
        assert KL.fp8_v2_default({"M": 16, "N": N, "K": K})["BM"] == 16
    # bf16: the GEMV only where it was measured faster (8 MB weights), tensor-core tiles for 2-4 MB and lm_head
    assert KL.bf16_v2_default({"T": 1, "Gl": 1, "O": 1024, "I": 4096})["BM"] == 1
    assert KL.bf16_v2_default({"M": 1, "N": 256, "K": 4096})["BM"] == 16
    assert KL.bf16_v2_default({"T": 1, "V": 16160, "D": 4096})["BM"] == 16
    impl = registry_impl("fp8_linear", "triton")
    w, s = Q.quant_fp8_weight(torch.randn(128, 512))
    x = torch.randn(2, 512).bfloat16()
    with pytest.raises(ValueError, match="BM=8"):
        impl.fn(x, w, s, config={"BM": 8, "BN": 64, "SPLIT": 1, "num_warps": 4, "num_stages": 1})
    # an NB that does not divide a split's K blocks (a config tuned for a longer K) is halved until it does, as SPLIT
    # is fitted: the same result as the fitted config
    cfg = {"BM": 1, "BN": 64, "SPLIT": 2, "num_warps": 4, "num_stages": 1}
    assert torch.equal(impl.fn(x[:1], w, s, config={**cfg, "NB": 4}), impl.fn(x[:1], w, s, config={**cfg, "NB": 2}))
    # the bf16 GEMV too (session 39: the H200's lm_head entry, NB 4 x SPLIT 8 for 32 K blocks, found by the nearest-key
    # lookup at D = 256 had raised): 2 K blocks over 2 splits run NB 1
    head = registry_impl("lm_head", "triton")
    wb = torch.randn(96, 256).bfloat16()
    got = head.fn(x[:1, :256], wb, config={"BM": 1, "BN": 64, "NB": 4, "SPLIT": 8, "num_warps": 4, "num_stages": 1})
    assert torch.equal(got, head.fn(x[:1, :256], wb, config={"BM": 1, "BN": 64, "NB": 1, "SPLIT": 2, "num_warps": 4,
                                                              "num_stages": 1}))
    assert [KL._fit_nb(n, k) for n, k in ((4, 2), (4, 1), (2, 6), (4, 8), (1, 3))] == [2, 1, 2, 4, 1]
    for bad in (0, 3):
        with pytest.raises(ValueError, match=f"NB={bad}"):
            head.fn(x[:1, :256], wb, config={"BM": 1, "BN": 64, "NB": bad, "SPLIT": 1, "num_warps": 4,
                                               "num_stages": 1})


@pytest.mark.gpu
def test_fp8_linear_split_k_tickets_on_gpu_and_in_a_cuda_graph():
    """The ticket protocol on real hardware (the interpreter runs programs one by one, so it cannot race): many
    splits and tiles, run eagerly and replayed from a CUDA graph, always equal to the three-launch path bit for
    bit, and every ticket back at zero."""
    from kernelbench.kernels import linear as KL
    impl = registry_impl("fp8_linear", "triton_v1")
    old = registry_impl("fp8_linear", "triton_3launch")
    gen = torch.Generator().manual_seed(7)
    x = (torch.randn(64, 4096, generator=gen) * 2).bfloat16().cuda()
    w, s = Q.quant_fp8_weight(torch.randn(1024, 4096, generator=gen) * 0.02)
    w, s = w.cuda(), s.cuda()
    for cfg in ({"BM": 16, "BN": 32, "SPLIT": 32, "num_warps": 4, "num_stages": 3},
                {"BM": 64, "BN": 64, "SPLIT": 4, "num_warps": 8, "num_stages": 4}):
        want = old.fn(x, w, s, config=cfg)
        for _ in range(10):
            assert torch.equal(impl.fn(x, w, s, config=cfg), want)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            y = impl.fn(x, w, s, config=cfg)
        for _ in range(10):
            y.zero_()
            g.replay()
            torch.cuda.synchronize()
            assert torch.equal(y, want)
        assert all(int(t.abs().sum()) == 0 for t in KL._TICKETS.values())


@triton.jit
def _act_quant_kernel(x_ptr, q_ptr, s_ptr, HW_CVT: tl.constexpr):
    r = tl.arange(0, 8)
    k = tl.arange(0, 128)
    q, s = act_quant_e4m3(tl.load(x_ptr + r[:, None] * 128 + k[None, :]).to(tl.float32), HW_CVT)
    tl.store(q_ptr + r[:, None] * 128 + k[None, :], q.to(tl.uint8, bitcast=True))
    tl.store(s_ptr + r, s)


def test_act_quant_e4m3_is_the_reference_bit_for_bit():
    """The fused GEMM's prologue quantizer (kernels/quant.py act_quant_e4m3) gives act_quant_fp8's codes and
    scales exactly, on rows built to hit every path: huge, tiny (subnormal codes), zero (the 1e-4 floor),
    values on e4m3 rounding ties, amax exactly 448 * 2^k. Interpreter: the integer rounding; on a GPU the
    hardware conversion (HW_CVT)."""
    dev = "cpu" if INTERPRET else ("cuda" if torch.cuda.is_available() else None)
    if dev is None:
        pytest.skip("needs TRITON_INTERPRET=1 or a GPU")
    gen = torch.Generator().manual_seed(5)
    x = torch.randn(8, 128, generator=gen)
    x[1] *= 1e4
    x[2] *= 1e-7
    x[3] = 0
    x[4] = (torch.randint(0, 64, (128,), generator=gen) + 0.5) * 2.0 ** -4 * torch.sign(x[4])   # ties at 1..4
    x[5, 0] = 448 * 2.0 ** -3
    x[6] = torch.linspace(-3, 3, 128)
    x[7, :64] = 1e-30
    x = x.bfloat16()
    q_ref, s_ref = Q.act_quant_fp8(x, 128)
    q = torch.empty((8, 128), dtype=torch.uint8, device=dev)
    sc = torch.empty(8, dtype=torch.float32, device=dev)
    _act_quant_kernel[(1,)](x.to(dev), q, sc, HW_CVT=not INTERPRET)
    assert torch.equal(q.cpu(), q_ref.view(torch.uint8)[:, :128].reshape(8, 128))
    assert torch.equal(sc.cpu(), s_ref[:, 0])


@pytest.mark.parametrize("decode", ["fp8", "bf16"])
def test_fp4_linear_decode_paths(decode, monkeypatch):
    """Both e2m1 decodes (bf16 bits + bf16 dots, e4m3 codes + fp8 dots per 32-group), ragged N and M, split K."""
    poisoned_empty(monkeypatch)
    cfg = {"BM": 16, "BN": 32, "SPLIT": 2, "num_warps": 4, "num_stages": 2, "DECODE": decode}
    check_against_reference("fp4_linear", {"M": 17, "N": 200, "K": 512}, "outliers", config=cfg)


def test_bf16_linear_bf16_out_and_odd_k(monkeypatch):
    poisoned_empty(monkeypatch)
    _, impl = spec_and_impl("bf16_linear")
    x = torch.randn(3, 96).bfloat16()
    w = torch.randn(40, 96).bfloat16()
    y = impl.fn(x, w, out_dtype=torch.bfloat16)
    assert y.dtype == torch.bfloat16
    assert torch.allclose(y.float(), L.bf16_linear(x, w, torch.bfloat16).float(), rtol=2 ** -7, atol=1e-3)


def test_bad_inputs():
    _, f8 = spec_and_impl("fp8_linear")
    _, f4 = spec_and_impl("fp4_linear")
    _, woa = spec_and_impl("grouped_wo_a")
    w, s = Q.quant_fp8_weight(torch.randn(128, 256))
    with pytest.raises(TypeError, match="bfloat16"):
        f8.fn(torch.randn(2, 256), w, s)
    with pytest.raises(ValueError, match=r"\[M, 256\]"):
        f8.fn(torch.randn(2, 128).bfloat16(), w, s)
    with pytest.raises(ValueError, match="weight_scale"):
        f8.fn(torch.randn(2, 256).bfloat16(), w, s[:, :1])
    with pytest.raises(TypeError, match="float8_e4m3fn"):
        f8.fn(torch.randn(2, 256).bfloat16(), w.float(), s)
    p, s4 = Q.quant_fp4_weight(torch.randn(64, 256))
    with pytest.raises(TypeError, match="float8_e8m0fnu"):
        f4.fn(torch.randn(2, 256).bfloat16(), p, s4.float())
    with pytest.raises(ValueError, match="grouped_wo_a"):
        woa.fn(torch.randn(2, 3, 64).bfloat16(), torch.randn(2, 8, 64).bfloat16())
    with pytest.raises(ValueError):
        L.fp8_linear(torch.randn(2, 128).bfloat16(), w, s)


@triton.jit
def _decode_e4m3_kernel(b_ptr, lo_ptr, hi_ptr):
    r = tl.arange(0, 256)
    x = tl.load(b_ptr + r)
    tl.store(lo_ptr + r, fp4_lo_e4m3(x).to(tl.float32))
    tl.store(hi_ptr + r, fp4_hi_e4m3(x).to(tl.float32))


def test_fp4_to_e4m3_decode_is_exact_for_every_byte():
    """kernels/quant.py fp4_lo_e4m3 / fp4_hi_e4m3: every packed byte's two nibbles become e4m3 codes whose value
    is exactly the e2m1 value / 64 (0.5 -> the e4m3 subnormal 2^-7, signed zeros included). Checked on the code
    bits by torch's e4m3 decode, and through the kernel (interpreter on the CPU, compiled on a GPU)."""
    table = torch.tensor([0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6])
    b = torch.arange(256, dtype=torch.int32)
    lo = (((b & 7) << 2) | ((b & 8) << 4)).to(torch.uint8).view(torch.float8_e4m3fn).float() * 64
    hi = (((b >> 2) & 0x1C) | (b & 0x80)).to(torch.uint8).view(torch.float8_e4m3fn).float() * 64
    assert torch.equal(lo, table[b & 15]) and torch.equal(hi, table[b >> 4])
    assert torch.equal(torch.signbit(lo), torch.signbit(table[b & 15]))

    dev = "cpu" if INTERPRET else ("cuda" if torch.cuda.is_available() else None)
    if dev is None:
        pytest.skip("needs TRITON_INTERPRET=1 or a GPU")
    bb = b.to(torch.uint8).to(dev)
    klo, khi = torch.empty(256, device=dev), torch.empty(256, device=dev)
    _decode_e4m3_kernel[(1,)](bb, klo, khi)
    assert torch.equal(klo.cpu() * 64, table[b & 15]) and torch.equal(khi.cpu() * 64, table[b >> 4])


@pytest.mark.gpu
def test_fp8_linear_on_gpu_deterministic_and_in_a_cuda_graph():
    """fp8_linear (v2) on real hardware: GEMV (M = 1) and tensor-core (M = 16, 64) paths with many splits, eager reruns
    and CUDA-graph replays bit-identical, close to the reference, every ticket back at zero; at M = 16 and 64 config XQ
    "once" (x quantized once by the racing programs) and PREFETCH "staged", alone and together, bit-equal to the default
    path, rerun five times."""
    from kernelbench.kernels import linear as KL
    impl = registry_impl("fp8_linear", "triton")
    gen = torch.Generator().manual_seed(11)
    w, s = Q.quant_fp8_weight(torch.randn(2048, 4096, generator=gen) * 0.02)
    w, s = w.cuda(), s.cuda()
    for M in (1, 16, 64):
        x = (torch.randn(M, 4096, generator=gen) * 2).bfloat16().cuda()
        want = impl.fn(x, w, s)
        if M > 1:       # x quantized once by the launch (config XQ "once", many programs racing for its chunks)
            # and x staged with the weights (PREFETCH "staged"), alone and together
            for cfg in ({"BM": 16, "BN": 64, "X_OPERAND": "B", "SPLIT": 8, "num_warps": 4, "num_stages": 3},
                        {"BM": 32, "BN": 128, "X_OPERAND": "B", "SPLIT": 4, "num_warps": 8, "num_stages": 4},
                        {"BM": 64, "BN": 64, "X_OPERAND": "A", "SPLIT": 4, "num_warps": 8, "num_stages": 3}):
                tile = impl.fn(x, w, s, config=cfg)
                for option, _, _, _ in X_PATH_OPTIONS:
                    for _ in range(5):
                        assert torch.equal(impl.fn(x, w, s, config={**cfg, **option}), tile)
        ref = L.fp8_linear(x.cpu(), w.cpu(), s.cpu()).float()
        assert (want.float().cpu() - ref).abs().max() <= 2 ** -7 * ref.abs().max()
        for _ in range(5):
            assert torch.equal(impl.fn(x, w, s), want)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            y = impl.fn(x, w, s)
        for _ in range(5):
            y.zero_()
            g.replay()
            torch.cuda.synchronize()
            assert torch.equal(y, want)
        assert all(int(t.abs().sum()) == 0 for t in KL._TICKETS.values())


# ---- KERNELBENCH_FP8_PROMOTE (session 46): a 128-deep fp8 dot's partial added in full fp32 every 32 / 64 products ----
_TILE16 = {"BM": 16, "BN": 64, "NB": 1, "X_OPERAND": "B", "SPLIT": 2, "num_warps": 4, "num_stages": 3, "PATH": "v2"}


@pytest.mark.parametrize("base", [_TILE16, {"BM": 64, "BN": 64, "SPLIT": 1, "num_warps": 4, "num_stages": 3,
                                            "PATH": "v1"}])
def test_fp8_promote_keeps_the_interpreters_result_and_refuses_other_counts(monkeypatch, base):
    # the interpreter has no reduced-precision adder to promote out of: every count gives the default's bits (the
    # setting changes only what tl.dot is asked on sm_90); a count other than 0 / 32 / 64 is refused by name
    from kernelbench.kernels import common
    spec = registry.get_op("fp8_linear")
    inp = spec.make_inputs({"M": 3, "N": 128, "K": 256}, torch.Generator().manual_seed(4), "cpu", "outliers")
    fn = registry.get_impl("fp8_linear", "triton").fn
    monkeypatch.delenv(common.FP8_PROMOTE_ENV, raising=False)
    plain = fn(**inp, config=base)
    for n in ("32", "64"):
        monkeypatch.setenv(common.FP8_PROMOTE_ENV, n)
        assert common.fp8_promote() == int(n)
        assert torch.equal(fn(**inp, config=base), plain)
    monkeypatch.setenv(common.FP8_PROMOTE_ENV, "16")
    with pytest.raises(ValueError, match="KERNELBENCH_FP8_PROMOTE"):
        fn(**inp, config=base)


@pytest.mark.parametrize("op, case, config", [      # the ops beside fp8_linear: opt-in (KB_SLOW=1, ~20 s cold)
    ("fp8_linear", {"M": 16, "N": 256, "K": 512}, _TILE16),
    pytest.param("shared_expert", {"T": 16, "D": 256, "F": 256}, None, marks=pytest.mark.slow),
    pytest.param("moe_layer", {"T": 16, "D": 256, "E": 16, "El": 4, "offset": 0, "F": 128, "K": 2, "V": 64,
                               "hash": False, "rs": 1.5}, None, marks=pytest.mark.slow),
])
def test_fp8_promote_reaches_the_sm90_tensor_core_loops_and_not_sm120(monkeypatch, op, case, config):
    # offline compiles (no GPU; each inspect call compiles in a fresh process that reads the variable): on sm_90 a
    # count of 32 adds the partial accumulator's FADDs to the QGMMA loops (more SASS, the same MMA instructions, no
    # spill); on sm_120 (mma.sync, no such adder) every kernel is the same size
    from kernelbench.harness import inspector
    registry.load_builtin()
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    for target, grows in (("sm_90", True), ("sm_120", False)):
        sizes = []
        for n in ("0", "32"):
            monkeypatch.setenv("KERNELBENCH_FP8_PROMOTE", n)
            (rep,) = inspector.inspect_jobs([(op, "triton", case, config)], target=target)
            for k in rep["kernels"]:
                assert not k["error"] and not k["spills"], (target, k["kernel"], k["error"])
            sizes.append({k["kernel"]: (k["sass_instructions"], tuple(k["sass_mma"])) for k in rep["kernels"]})
        plain, promoted = sizes
        assert plain.keys() == promoted.keys()
        assert all(plain[k][1] == promoted[k][1] for k in plain), target
        assert (sum(v[0] for v in promoted.values()) > sum(v[0] for v in plain.values())) == grows, (target, sizes)
