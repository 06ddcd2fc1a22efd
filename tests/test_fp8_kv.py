"""The attention cache stored as FP8 (kernels/attention.py pack_fp8_kv, impl triton_fp8kv of sparse_attention): the
entries every attention cache of the model holds (the non-rope dims FP8-simulated in groups of 64 by kv_write and the
compressor) packed exactly into e4m3 codes, one UE8M0 exponent byte per 64 dims and the bf16 rope dims (584 bytes an
entry at the Flash widths instead of 1024); the split kernel making each gathered row bf16 again, so the output equals
impl triton's bit for bit at the same config in the interpreter (compiled, within 2^-7 of the output's largest value:
the GPU tests); the fallback for a cache that is not FP8, bad inputs, sm_120."""
from __future__ import annotations

import pytest
import torch

from kernelbench import registry
from kernelbench.kernels.common import INTERPRET
from kernelbench.ops.attention import fp8_simulated_cache
from _kernel_check import fits_sm120
from _quant_moe_util import check_against_reference, poisoned_empty

registry.load_builtin()
from kernelbench.kernels import attention as KA  # noqa: E402  (after the registry: the interpreter flag is set)

E4M3 = torch.float8_e4m3fn
SPEC = registry.get_op("sparse_attention")


def _simulated(b, n, dh, r, gen):
    return fp8_simulated_cache(torch.randn(b, n, dh, generator=gen).bfloat16(), r)


def test_pack_is_exact_and_refuses_what_is_not_fp8():
    """A simulated cache (two magnitudes, an all-zero group, a NaN row as the op's never-read rows) packs into codes
    x 2^(e - 127) equal to every non-rope value, the rope dims as they are, exponent 127 over the rope group; a group
    whose codes stay under 224 takes a smaller scale, still exact. A cache that is not FP8, rope dims other than 0 or
    64, or a non-bf16 cache gives None; prepare then leaves the inputs as they are (the bf16 path)."""
    gen = torch.Generator().manual_seed(3)
    kv = _simulated(2, 5, 256, 64, gen)
    kv[1, 2, :64] *= 0.125                      # exact: a power of two; the group's codes then stay small...
    kv[0, 1, 64:128] = 0                        # an all-zero group
    kv[1, 4] = float("nan")                     # a row no token reads
    codes, rope, exps = KA.pack_fp8_kv(kv, 64)
    assert codes.dtype == E4M3 and codes.shape == (2, 5, 192)
    assert rope.dtype == torch.bfloat16 and torch.equal(rope[:1], kv[:1, :, 192:])
    assert exps.dtype == torch.uint8 and exps.shape == (2, 5, 4) and bool((exps[..., 3] == 127).all())
    scale = torch.ldexp(torch.ones(exps.shape), exps.int() - 127)[..., :3].repeat_interleave(64, -1)
    back = codes.float() * scale
    fin = torch.isfinite(kv[..., :192].float())
    assert torch.equal(back[fin], kv[..., :192].float()[fin]) and bool(torch.isnan(back[~fin]).all())
    assert exps[0, 1, 1] == 127                 # the zero group: scale 1
    assert codes[1, 2, :64].float().abs().max() > 224       # ...so its scale is 8x smaller and the codes fill the range
    assert KA.pack_fp8_kv(torch.randn(1, 4, 128, generator=gen).bfloat16(), 64) is None
    assert KA.pack_fp8_kv(kv, 32) is None and KA.pack_fp8_kv(kv.float(), 64) is None
    plain = {"kv": torch.randn(1, 4, 128, generator=gen).bfloat16(), "freqs": torch.ones(32)}
    assert KA.prepare_fp8_kv(plain) is plain
    assert KA.pack_fp8_kv(_simulated(1, 3, 128, 0, gen), 0) is not None     # no rope dims: every dim FP8


CASES = [
    {"T": 3, "Hl": 8, "Dh": 512, "R": 64, "W": 16, "kind": "csa", "ratio": 4, "topk": 24, "ctx": 150, "ragged": True,
     "rope": True, "lengths": True},
    {"T": 2, "Hl": 4, "Dh": 128, "R": 64, "W": 16, "kind": "hca", "ratio": 8, "topk": 16, "ctx": 300,
     "ragged": False, "rope": True, "lengths": True},
    {"T": 2, "Hl": 4, "Dh": 128, "R": 64, "W": 16, "kind": "csa", "ratio": 4, "topk": 16, "ctx": 60,
     "ragged": True, "rope": False, "lengths": False},
]


@pytest.mark.parametrize("p", CASES)
@pytest.mark.parametrize("cfg", [None, {"BLOCK_H": 16, "BLOCK_N": 16, "num_warps": 4, "num_stages": 1, "waves": 64}])
def test_fp8_cache_is_bit_equal_to_the_bf16_cache(p, cfg, monkeypatch):
    """On the op's inputs (the cache FP8-simulated as the model holds it; rope off: every dim), impl triton_fp8kv on
    the packed cache is within the reference's tolerance on poisoned outputs and equals impl triton on the bf16
    cache at the same config bit for bit, many splits included."""
    poisoned_empty(monkeypatch)
    inp, out, _ = check_against_reference("sparse_attention", p, "normal", config=cfg, impl_name="triton_fp8kv")
    impl = registry.get_impl("sparse_attention", "triton_fp8kv")
    run = impl.prepared(inp)
    assert run["kv"].dtype == E4M3 and run["kv_exp"].dtype == torch.uint8
    same = cfg or impl.default_config(p)
    assert torch.equal(out[0], KA.sparse_attention(**inp, config=same))


def test_fp8_cache_bad_inputs():
    """The packed form's parts are checked by name: one part missing, a wrong dtype or shape, and PREFETCH (which
    gathers bf16 rows ahead) are refused; without the parts the bf16 cache runs impl triton's path."""
    p = CASES[1]
    inp = SPEC.make_inputs(p, torch.Generator().manual_seed(1), "cpu", "normal")
    impl = registry.get_impl("sparse_attention", "triton_fp8kv")
    run = impl.prepared(inp)
    with pytest.raises(ValueError, match="both kv_rope and kv_exp"):
        impl.fn(**{**run, "kv_exp": None})
    with pytest.raises(TypeError, match="kv_exp must be torch.uint8"):
        impl.fn(**{**run, "kv_exp": run["kv_exp"].int()})
    with pytest.raises(ValueError, match="kv_rope must have shape"):
        impl.fn(**{**run, "kv_rope": run["kv_rope"][:, :, :32].contiguous()})
    with pytest.raises(TypeError, match="FP8 codes"):
        impl.fn(**{**run, "kv": inp["kv"][..., :64].contiguous()})
    with pytest.raises(ValueError, match="PREFETCH"):
        impl.fn(**run, config={**KA.fp8kv_default(p), "PREFETCH": 1})
    cfg = KA.fp8kv_default(p)
    assert torch.equal(impl.fn(**inp, config=cfg), KA.sparse_attention(**inp, config=cfg))


def test_fp8_cache_space_fits_sm120():
    """The default and the 8-warp config of impl triton_fp8kv at the Flash TP8 64-token case compile for sm_120
    within its shared memory, without spills (the 32-entry blocks do not: fp8kv_configs), one program an SM or more."""
    p = next(c for c in SPEC.shape_cases("flash-tp8") if c["T"] == 64)
    impl = registry.get_impl("sparse_attention", "triton_fp8kv")
    assert all(c["BLOCK_N"] == 16 for c in impl.configs(p))
    fits_sm120("sparse_attention", "triton_fp8kv", p, (None, {**KA.fp8kv_default(p), "num_warps": 8}), "_attn_split")


@pytest.mark.gpu
@pytest.mark.skipif(INTERPRET or not torch.cuda.is_available(), reason="needs a CUDA GPU; runs on the device machine "
                    "(scripts/device_gpu_tests.sh rest)")
def test_gpu_fp8_cache_is_within_one_ulp_of_the_largest():
    """Compiled, at the Flash TP8 shapes (1, 16 and 64 tokens, csa and hca): impl triton_fp8kv on the packed cache
    is within 2^-7 of the largest value of impl triton's output on the bf16 cache at the same config, and equal in
    nearly all values, direct and replayed from a CUDA graph. Not bit for bit as in the interpreter: the rows it
    gives the dot are the same bits (test_gpu_fp8_rows_come_back_exactly), but rows made in registers reach the
    tensor cores another way than rows loaded from memory, so the fp32 sums round differently: on an H100 (session
    56) 0-105 of 4,096-262,144 values per case came out apart, by at most 3.9e-3 where the largest value is 1.21
    (2^-8.3 of it). A small value can be many of its own ulps away: the sums round at the row's scale."""
    impl = registry.get_impl("sparse_attention", "triton_fp8kv")
    for p in [c for c in SPEC.shape_cases("flash-tp8") if c["ctx"] == 512]:
        inp = SPEC.make_inputs(p, torch.Generator().manual_seed(p["T"]), "cuda", "normal")
        run = impl.prepared(inp)
        assert run["kv"].dtype == E4M3, p
        cfg = impl.default_config(p)
        want = KA.sparse_attention(**inp, config=cfg)
        _assert_near_the_largest(impl.fn(**run, config=cfg), want, p)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            o = impl.fn(**run, config=cfg)
        for _ in range(3):
            o.fill_(float("nan"))
            g.replay()
            torch.cuda.synchronize()
            _assert_near_the_largest(o, want, p)


def _assert_near_the_largest(got: torch.Tensor, want: torch.Tensor, case) -> None:
    """Every value of got within one bf16 ulp of want's largest magnitude (2^-7 of it: what the fp32 sums' order can
    move after the bf16 rounding of the output), under 1% of the values apart."""
    assert not got.isnan().any(), case
    d = (got.float() - want.float()).abs()
    assert d.max().item() <= 2.0 ** -7 * want.float().abs().max().item(), (case, d.max().item())
    assert (d > 0).float().mean().item() < 0.01, (case, int((d > 0).sum()))


@pytest.mark.gpu
@pytest.mark.skipif(INTERPRET or not torch.cuda.is_available(), reason="needs a CUDA GPU; runs on the device machine "
                    "(scripts/device_gpu_tests.sh rest)")
def test_gpu_fp8_rows_come_back_exactly():
    """Compiled: the split kernel's row decode (`_fp8_kv_rows`, through a probe kernel that stores what it returns)
    gives back every entry of a simulated Flash-width cache bit for bit, its rope dims included."""
    import triton
    import triton.language as tl

    @triton.jit
    def _probe(kc, kr, ke, out, n, s_cn, s_rn, s_en, DH: tl.constexpr, NOPE: tl.constexpr, BN: tl.constexpr,
               GROUP: tl.constexpr):
        rows = tl.program_id(0) * BN + tl.arange(0, BN)
        valid = rows < n
        v = KA._fp8_kv_rows(kc, kr, ke, rows.to(tl.int64), valid, s_cn, s_rn, s_en, DH, NOPE, BN, GROUP)
        tl.store(out + rows[:, None] * DH + tl.arange(0, DH)[None, :], v, mask=valid[:, None])

    kv = _simulated(1, 300, 512, 64, torch.Generator().manual_seed(5)).cuda()[0]
    codes, rope, exps = KA.pack_fp8_kv(kv[None], 64)
    out = torch.full_like(kv, float("nan"))
    _probe[(triton.cdiv(300, 16),)](codes[0], rope[0], exps[0], out, 300, codes.stride(1), rope.stride(1),
                                    exps.stride(1), DH=512, NOPE=448, BN=16, GROUP=KA.KV_GROUP)
    torch.cuda.synchronize()
    bad = (out.view(torch.int16) != kv.view(torch.int16)).nonzero()
    assert bad.numel() == 0, f"{len(bad)} values differ, first at {bad[:4].tolist()}: " \
                             f"{out[tuple(bad[0])].item()} for {kv[tuple(bad[0])].item()}"
