"""wo_a read as FP8 (kernels/linear.py prepare_wo_a): the checkpoint's e4m3 codes and power-of-two block scales found
again from the bf16 weight DeepSeek's reference loads, exactly; the kernels on them bit-equal to the same kernels on
the bf16 weight (grouped_wo_a's GEMV and tensor-core tiles, sparse_attention_wo_a's two ops and its JOIN), the
fallback to bf16 for a weight that is not FP8, bad inputs, and the decoder holding one copy for both ops."""
from __future__ import annotations

import pytest
import torch

from kernelbench import registry
from kernelbench.kernels.common import INTERPRET
from kernelbench.ops.quant import fp8_dequantised
from kernelbench.reference.quant import block_scales_full
from _quant_moe_util import check_against_reference, poisoned_empty

registry.load_builtin()
from kernelbench.kernels import attention as KA  # noqa: E402  (after the registry: the interpreter flag is set)
from kernelbench.kernels import linear as KL  # noqa: E402

E4M3 = torch.float8_e4m3fn


@pytest.fixture
def gen():
    return torch.Generator().manual_seed(5)


def test_fp8_blocks_are_found_exactly(gen):
    """A checkpoint weight dequantised (partial 128 blocks on both sides) comes back as codes x scale equal to it
    in every element; a block whose codes all stay under 224 takes a smaller scale, still exact; a bf16 weight that
    is not FP8, or one with an inf, gives None; an all-zero block takes scale 1."""
    w = fp8_dequantised(200, 320, gen, 2)                     # [2, 200, 320]: 2 x 3 blocks a group, ragged
    w[1, :128, 128:256] *= 0.25                               # codes under 112 in that block (scale / 4 is exact)
    w[0, 128:, 256:] = 0                                      # an all-zero block
    codes, scale = KL.fp8_blocks_exact(w)
    assert codes.dtype == E4M3 and scale.shape == (2, 2, 3) and scale.dtype == torch.float32
    assert torch.equal(codes.float() * block_scales_full(scale, 200, 320), w.float())
    m, _ = torch.frexp(scale)
    assert bool((m == 0.5).all())                             # powers of two
    assert scale[0, 1, 2] == 1.0
    assert codes[1, :128, 128:256].float().abs().max() > 224  # the smaller scale makes the codes use the range
    assert KL.fp8_blocks_exact(torch.randn(1, 64, 256, generator=gen).bfloat16()) is None
    bad = w.clone()
    bad[0, 0, 0] = float("inf")
    assert KL.fp8_blocks_exact(bad) is None
    plain = {"o": torch.zeros(1), "weight": torch.randn(1, 64, 256, generator=gen).bfloat16()}
    assert KL.prepare_wo_a(plain, "weight") is plain          # not FP8: the bf16 path


GROUPED = [({"T": 1, "Gl": 2, "O": 96, "I": 512}, {"BM": 1, "BN": 64, "NB": 2, "SPLIT": 2, "num_warps": 4,
                                                   "num_stages": 1}),
           ({"T": 1, "Gl": 1, "O": 200, "I": 384}, {"BM": 1, "BN": 32, "NB": 1, "SPLIT": 3, "num_warps": 4,
                                                    "num_stages": 1}),
           ({"T": 3, "Gl": 2, "O": 200, "I": 320}, {"BM": 16, "BN": 64, "SPLIT": 1, "num_warps": 4,
                                                    "num_stages": 1}),
           ({"T": 5, "Gl": 1, "O": 128, "I": 512}, {"BM": 16, "BN": 32, "SPLIT": 2, "num_warps": 4,
                                                    "num_stages": 1}),
           ({"T": 1, "Gl": 1, "O": 64, "I": 256}, None)]


@pytest.mark.parametrize("p, cfg", GROUPED)
def test_grouped_wo_a_on_fp8_codes_is_bit_equal_to_bf16(p, cfg, monkeypatch):
    """impl triton (the codes, prepared by the registry) against triton_bf16 (the same kernel on the bf16 weight):
    the FMA GEMV (NB 1 / 2, split K, ragged N, a partial last K block) and the tensor-core tiles, bit for bit, both
    within the reference's tolerance, on poisoned outputs."""
    poisoned_empty(monkeypatch)
    inp, out, _ = check_against_reference("grouped_wo_a", p, "outliers", config=cfg, impl_name="triton")
    fp8 = registry.get_impl("grouped_wo_a", "triton")
    prepared = fp8.prepared(inp)
    assert prepared["weight"].dtype == E4M3 and prepared["weight_scale"].dtype == torch.float32
    kw = {"config": cfg} if cfg else {}
    bf16 = registry.get_impl("grouped_wo_a", "triton_bf16")
    assert bf16.prepared(inp) is inp
    assert torch.equal(out[0], bf16.fn(**inp, **kw))


ATTN = {"R": 64, "W": 16, "ratio": 8}


@pytest.mark.parametrize("p, join", [
    ({"T": 2, "Hl": 4, "Dh": 256, "kind": "hca", "topk": 8, "ctx": 150, "ragged": True, "rope": True,
      "lengths": False, "Gl": 2, "O": 96}, {"JOIN": True, "SPAN": 256, "BN_O": 64, "O_WARPS": 4}),
    ({"T": 1, "Hl": 2, "Dh": 128, "kind": "csa", "topk": 24, "ctx": 200, "ragged": False, "rope": True,
      "lengths": True, "Gl": 1, "O": 160}, {"JOIN": True, "BN_O": 32}),
])
def test_sparse_attention_wo_a_on_fp8_codes_is_bit_equal_to_bf16(gen, p, join, monkeypatch):
    """sparse_attention_wo_a triton / triton_parts on the prepared codes against triton_bf16 on the bf16 weight:
    the default (the two ops) and the JOIN kernel (its GEMV scales each 128-column block's sum), bit for bit, and the
    reference's tolerance."""
    poisoned_empty(monkeypatch)
    p = {**ATTN, **p}
    spec = registry.get_op("sparse_attention_wo_a")
    inp = spec.make_inputs(p, gen, "cpu", "normal")
    fp8 = registry.get_impl("sparse_attention_wo_a", "triton").prepared(inp)
    assert fp8["wo_a"].dtype == E4M3 and set(fp8) - set(inp) == {"wo_a_scale"}
    assert registry.get_impl("sparse_attention_wo_a", "triton_parts").prepared(inp).keys() == fp8.keys()
    ref = spec.reference(**inp)
    for cfg in (None, {**KA.woa_default(p), **join}):
        kw = {"config": cfg} if cfg else {}
        want = KA.sparse_attention_wo_a(**inp, **kw)
        assert torch.equal(KA.sparse_attention_wo_a(**fp8, **kw), want), cfg
        assert (want.float() - ref.float()).abs().max() <= 2 ** -5 * ref.float().abs().max()
    assert torch.equal(KA.sparse_attention_wo_a_parts(**fp8), KA.sparse_attention_wo_a_parts(**inp))


def test_wo_a_fp8_bad_inputs(gen):
    """Codes without scales, scales of the wrong shape or dtype, scales beside a bf16 weight: refused by name."""
    w = fp8_dequantised(64, 256, gen, 2)
    codes, scale = KL.fp8_blocks_exact(w)
    o = torch.randn(1, 2, 256).bfloat16()
    fn = registry.get_impl("grouped_wo_a", "triton").fn
    assert torch.equal(fn(o, codes, scale), fn(o, w))
    with pytest.raises(TypeError, match="weight must be torch.bfloat16"):
        fn(o, codes)
    with pytest.raises(ValueError, match="weight_scale must have shape"):
        fn(o, codes, scale[:, :, :1])
    with pytest.raises(TypeError, match="weight_scale must be torch.float32"):
        fn(o, codes, scale.to(torch.float8_e8m0fnu))
    with pytest.raises(TypeError, match="weight must be torch.float8_e4m3fn"):
        fn(o, w, scale)
    p = {**ATTN, "T": 1, "Hl": 4, "Dh": 128, "kind": "swa", "topk": 8, "ctx": 20, "ragged": False, "rope": True,
         "lengths": False, "Gl": 2, "O": 64}
    inp = registry.get_op("sparse_attention_wo_a").make_inputs(p, gen, "cpu", "normal")
    c, s = KL.fp8_blocks_exact(inp["wo_a"])
    with pytest.raises(ValueError, match="bf16"):
        KA.sparse_attention_wo_a(**{**inp, "wo_a": c})
    with pytest.raises(ValueError, match="wo_a_scale must have shape"):
        KA.sparse_attention_wo_a(**{**inp, "wo_a": c, "wo_a_scale": s[:1]})
    with pytest.raises(ValueError, match=r"wo_a \[Gl, O, Hl/Gl\*Dh\]"):
        KA.sparse_attention_wo_a(**{**inp, "wo_a": c[..., :128], "wo_a_scale": s[..., :1]})


class _Env:
    def __init__(self, ops):
        self.ops = ops


@pytest.mark.parametrize("impl, use, forms", [("triton", {}, 1), ("reference", {}, 1),
                                              ("triton", {"sparse_attention_wo_a": "triton_bf16"}, 2)])
def test_decoder_holds_wo_a_once_per_layout(gen, impl, use, forms):
    """The decoder's attention prepares wo_a for both ops that apply it (sparse_attention_wo_a at decode,
    grouped_wo_a at prefill): one FP8 copy shared when both implementations read the codes, the bf16 weight alone for
    the reference, two forms when they differ; every form gives the bf16 weight's values."""
    from torch import nn
    from kernelbench.decoder.backend import Ops
    from kernelbench.decoder.model import Attention
    part = Attention.__new__(Attention)
    nn.Module.__init__(part)
    w = fp8_dequantised(96, 256, gen, 1)
    args = part._wo_a_forms(_Env(Ops(impl, use)), w)
    held = [t for name, t in part.named_buffers() if not name.endswith("_scale")]
    assert len(held) == forms
    for op, (name, scale_name) in Attention.WO_A_OPS.items():
        got = args[op]
        if scale_name in got:
            assert got[name].dtype == E4M3
            assert torch.equal(got[name].float() * block_scales_full(got[scale_name], 96, 256), w.float())
        else:
            assert got[name] is w
    if forms == 1 and impl == "triton":
        assert args["sparse_attention_wo_a"]["wo_a"] is args["grouped_wo_a"]["weight"]


@pytest.mark.gpu
@pytest.mark.skipif(INTERPRET or not torch.cuda.is_available(), reason="needs a CUDA GPU; runs on the device machine "
                    "(scripts/device_gpu_tests.sh rest)")
def test_gpu_wo_a_fp8_is_bit_equal_to_bf16():
    """Compiled (PDL on at one token: the weight prefetch counts bytes of the codes), at the Flash TP8 shapes:
    grouped_wo_a at 1, 16 and 64 tokens (the GEMV and the tensor-core tiles) and sparse_attention_wo_a at one
    token, the default and JOIN, on the FP8 codes bit-equal to the bf16 weight, direct and replayed from a CUDA
    graph."""
    spec = registry.get_op("grouped_wo_a")
    fp8, bf16 = (registry.get_impl("grouped_wo_a", n) for n in ("triton", "triton_bf16"))
    for T in (1, 16, 64):
        p = {"T": T, "Gl": 1, "O": 1024, "I": 4096}
        inp = spec.make_inputs(p, torch.Generator().manual_seed(T), "cuda", "normal")
        want = bf16.fn(**inp)
        run = fp8.prepared(inp)
        assert run["weight"].dtype == E4M3
        assert torch.equal(fp8.fn(**run), want), T
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            z = fp8.fn(**run)
        for _ in range(3):
            z.fill_(float("nan"))
            g.replay()
            torch.cuda.synchronize()
            assert torch.equal(z, want), T
    spec = registry.get_op("sparse_attention_wo_a")
    impl = registry.get_impl("sparse_attention_wo_a", "triton")
    for case in [c for c in spec.shape_cases("flash-tp8") if c["T"] == 1 and c["ctx"] == 512]:
        inp = spec.make_inputs(case, torch.Generator().manual_seed(3), "cuda", "normal")
        run = impl.prepared(inp)
        for cfg in (KA.woa_default(case), {**KA.woa_default(case), "JOIN": True}):
            assert torch.equal(impl.fn(**run, config=cfg), impl.fn(**inp, config=cfg)), (case, cfg)
