"""rms_norm, hadamard, rope (+ YaRN freqs), head_rms_norm_rope: properties that hold whatever the
reference says (checked on the reference in fp64 and on the kernels), kernel vs reference in the
interpreter, and the errors bad inputs get."""
import math

import numpy as np
import pytest
import torch

from kernelbench import registry
from kernelbench.config import FLASH, PRO, TINY
from kernelbench.reference import hadamard as HD
from kernelbench.reference import norm as NR
from kernelbench.reference import rope as RP
from kernelbench.reference.precision import compute_dtype
from _kernel_check import needs_triton, run_impl, verify, verify_drawn
from kernelbench.kernels.common import INTERPRET

registry.load_builtin()


def triton_fn(op):
    return registry.get_impl(op, "triton").fn


# YaRN frequencies --------------------------------------------------------------------------------
@pytest.mark.parametrize("cfg", [FLASH, PRO])
def test_yarn_correction_dims_are_15_and_25(cfg):
    # SPEC 3.4: theta 160000, original length 65536, beta 32 / 1 -> dims 15 and 25
    assert RP.yarn_correction_range(cfg.yarn_beta_fast, cfg.yarn_beta_slow, cfg.rope_head_dim,
                                    cfg.compress_rope_theta, cfg.yarn_original_seq_len) == (15, 25)
    # the unrounded dims, from the wavelength definition: 2*pi*theta^(2i/R) * beta = L
    for beta, lo, hi in ((32.0, 15, 16), (1.0, 24, 25)):
        i = math.log(65536 / (2 * math.pi * beta)) / math.log(160000) * 64 / 2
        assert lo < i < hi


def test_plain_freqs_for_swa_layers():
    f = RP.rope_freqs(FLASH, compressed=False)
    assert f.dtype == torch.float32 and f.shape == (32,)
    want = [10000.0 ** (-2 * i / 64) for i in range(32)]
    assert torch.allclose(f.double(), torch.tensor(want, dtype=torch.float64), rtol=1e-7, atol=0)


def test_freqs_are_deepseeks_fp32_table():
    """The table DeepSeek's precompute_freqs_cis builds: fp32 arithmetic, entry for entry (an fp64 table
    rounded once differs by an ulp in about a third of the entries)."""
    f = RP.rope_freqs(FLASH, compressed=False)
    want = 1.0 / (10000.0 ** (torch.arange(0, 64, 2, dtype=torch.float32) / 64))
    assert torch.equal(f, want)
    exact = (1.0 / (10000.0 ** (torch.arange(0, 64, 2, dtype=torch.float64) / 64))).float()
    assert not torch.equal(want, exact)                    # the case tells the two computations apart


def test_yarn_freqs_keep_low_dims_divide_high_dims_blend_between():
    f = RP.rope_freqs(FLASH, compressed=True).double()
    plain = torch.tensor([160000.0 ** (-2 * i / 64) for i in range(32)], dtype=torch.float64)
    assert torch.allclose(f[:16], plain[:16], rtol=1e-7)            # i <= low = 15: unchanged
    assert torch.allclose(f[25:], plain[25:] / 16, rtol=1e-7)      # i >= high = 25: divided by factor 16
    mid = f[16:25] / plain[16:25]                                  # strictly between, and falling
    assert bool(((mid < 1) & (mid > 1 / 16)).all()) and bool((mid[1:] < mid[:-1]).all())
    # linear ramp in i: the weight of the 1/factor branch is (i - 15) / 10
    w = (1 - mid) / (1 - 1 / 16)
    assert torch.allclose(w, (torch.arange(16, 25, dtype=torch.float64) - 15) / 10, atol=1e-6)


# RoPE --------------------------------------------------------------------------------------------
def test_rope_rotates_each_pair_by_its_own_angle():
    f = RP.rope_freqs(FLASH, compressed=True)
    pos = torch.tensor([0, 1, 1000, 1048575])
    x = torch.zeros(4, 1, 64, dtype=torch.float64)
    x[..., 0::2] = 1.0                                   # every pair = 1 + 0i
    with compute_dtype(torch.float64):
        y = RP.rope(x, pos, f)
    ang = (pos.numpy().astype(np.float32)[:, None] * f.numpy()[None, :]).astype(np.float64)   # fp32 angle
    assert np.allclose(y[:, 0, 0::2].numpy(), np.cos(ang), atol=1e-12)
    assert np.allclose(y[:, 0, 1::2].numpy(), np.sin(ang), atol=1e-12)   # counter-clockwise: i * sin


def test_rope_inverse_is_identity_and_keeps_pair_norms():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(5, 3, 64, generator=g, dtype=torch.float64)
    pos = torch.randint(0, 1 << 20, (5,), generator=g)
    f = RP.rope_freqs(FLASH, compressed=False)
    with compute_dtype(torch.float64):
        y = RP.rope(x, pos, f)
        back = RP.rope(y, pos, f, inverse=True)
    assert torch.allclose(back, x, atol=1e-12)
    norms = lambda t: t[..., 0::2] ** 2 + t[..., 1::2] ** 2   # noqa: E731
    assert torch.allclose(norms(y), norms(x), rtol=1e-12)
    assert not torch.allclose(y, x, atol=1e-3)           # and it did rotate


@needs_triton
def test_rope_kernel_inverse_undoes_rotation_at_1m_positions():
    g = torch.Generator().manual_seed(1)
    x = torch.randn(3, 4, 64, generator=g).bfloat16()
    pos = torch.tensor([5, 654321, 1048575])
    f = RP.rope_freqs(FLASH, compressed=True)
    back = triton_fn("rope")(x=triton_fn("rope")(x=x, positions=pos, freqs=f), positions=pos, freqs=f, inverse=True)
    assert torch.allclose(back.float(), x.float(), rtol=2 ** -6, atol=2 ** -6)
    zero = triton_fn("rope")(x=x, positions=torch.zeros(3, dtype=torch.int64), freqs=f)
    assert torch.equal(zero, x)                         # position 0 rotates by nothing


def test_head_rms_norm_rope_is_unit_rms_then_rotated():
    g = torch.Generator().manual_seed(2)
    q = torch.randn(2, 3, 128, generator=g, dtype=torch.float64) * 7
    pos = torch.tensor([3, 70000])
    f = RP.rope_freqs(TINY, compressed=True)
    with compute_dtype(torch.float64):
        y = RP.head_rms_norm_rope(q, pos, f, eps=1e-12)
        rms = q.square().mean(-1, keepdim=True).sqrt()
        assert torch.allclose(y.square().mean(-1), torch.ones(2, 3, dtype=torch.float64), atol=1e-9)
        assert torch.allclose(y[..., :64], q[..., :64] / rms, atol=1e-9)
        assert torch.allclose(y[..., 64:], RP.rope((q / rms)[..., 64:], pos, f), atol=1e-9)


def _official_q_norm(q: torch.Tensor, positions, freqs, eps: float) -> torch.Tensor:
    """DeepSeek's literal expression on the bf16 tensor, then the same RoPE."""
    y = q.clone()
    y *= torch.rsqrt(y.square().mean(-1, keepdim=True) + eps)
    r = 2 * freqs.shape[0]
    rot = RP.apply_rope(y[..., -r:].float(), RP.rope_angles(positions, freqs)).to(q.dtype)
    return torch.cat([y[..., :-r], rot], dim=-1)


# q = (1, 1, 1, 1.5): squares exact, mean 5.25 / 4 = 1.3125, + eps stays 1.3125; rsqrt = 0.87287...
# rounds to 223/256 = 0.87109375; 1.5 * 0.87109375 = 1.306640625 rounds to 1.3046875. In fp32 with
# one final rounding the last element is bf16(1.5 * 0.87287...) = bf16(1.30931) = 1.3125.
HAND_Q = [1.0, 1.0, 1.0, 1.5]
HAND_BF16 = [0.87109375, 0.87109375, 0.87109375, 1.3046875]
HAND_FP32 = [0.87109375, 0.87109375, 0.87109375, 1.3125]


@pytest.mark.parametrize("impl", ["reference", pytest.param("triton", marks=needs_triton)])
def test_q_norm_rounds_every_step_to_bf16_as_deepseek(impl):
    q = torch.tensor(HAND_Q, dtype=torch.bfloat16).view(1, 1, 4)
    pos, f = torch.zeros(1, dtype=torch.int64), torch.ones(1)             # R = 2 at position 0: no rotation
    fp32 = q.float() * torch.rsqrt(q.float().square().mean(-1, keepdim=True) + 1e-6)
    assert fp32.bfloat16().flatten().tolist() == HAND_FP32               # the old arithmetic, for contrast
    y = run_impl("head_rms_norm_rope", impl, q=q, positions=pos, freqs=f, eps=1e-6)
    assert y.flatten().tolist() == HAND_BF16
    assert torch.equal(y, _official_q_norm(q, pos, f, 1e-6))
    if impl == "reference":                                               # the roundings are the contract
        with compute_dtype(torch.float64):
            assert RP.head_rms_norm_rope(q, pos, f, 1e-6).flatten().tolist() == HAND_BF16


@pytest.mark.parametrize("impl", ["reference", pytest.param("triton", marks=needs_triton)])
def test_q_norm_adds_eps_rounded_to_bf16(impl):
    """mean 2^-28 (q = 2^-14): torch CPU rounds the scalar eps = 1e-6 to bf16 (9.98e-7) before adding,
    so mean + eps rounds to 9.98e-7; 1e-6 in fp32 would round to 1.006e-6 and change the scale."""
    q = torch.full((1, 1, 8), 2.0 ** -14, dtype=torch.bfloat16)
    pos, f = torch.zeros(1, dtype=torch.int64), torch.ones(2)
    eps_bf16 = float(torch.tensor(1e-6, dtype=torch.bfloat16))
    shifted = lambda e: torch.tensor(2.0 ** -28 + e, dtype=torch.float32).bfloat16()   # noqa: E731
    assert shifted(eps_bf16) != shifted(1e-6)
    want = float((q[0, 0, 0].float() * torch.rsqrt(shifted(eps_bf16).float()).bfloat16().float()).bfloat16())
    y = run_impl("head_rms_norm_rope", impl, q=q, positions=pos, freqs=f, eps=1e-6)
    assert y.flatten().tolist() == [want] * 8
    assert torch.equal(y, _official_q_norm(q, pos, f, 1e-6))


@pytest.mark.parametrize("impl", ["reference", pytest.param("triton", marks=needs_triton)])
def test_q_norm_equals_deepseeks_expression_on_random_heads(impl):
    """Bit for bit against torch's own bf16 arithmetic at a Flash head (Dh 512) and an odd width (96),
    over scales where eps matters (tiny) and where it does not. 4 x 8 heads: torch's CPU bf16 rsqrt
    rounds fp32 1/sqrt once in its 32-wide vector loop, but its scalar tail (the last count % 32
    elements) rounds sqrt to bf16 before dividing; the contract is the vector loop's single rounding
    (docs/OPS.md), so the head count here fills whole vectors."""
    g = torch.Generator().manual_seed(6)
    f = RP.rope_freqs(FLASH, compressed=True)
    for dh, scale in ((512, 1.0), (512, 1e-3), (96, 30.0)):
        q = (torch.randn(4, 8, dh, generator=g) * scale * torch.exp(torch.randn(4, 8, 1, generator=g))).bfloat16()
        pos = torch.randint(0, 1 << 20, (4,), generator=g)
        y = run_impl("head_rms_norm_rope", impl, q=q, positions=pos, freqs=f, eps=1e-6)
        want = _official_q_norm(q, pos, f, 1e-6)
        assert torch.equal(y, want), (dh, scale, _bf16_differences(y, want, rope_dims=2 * f.shape[0]))


def _bf16_differences(y: torch.Tensor, want: torch.Tensor, rope_dims: int) -> str:
    """Where two bf16 tensors differ, for the failure message: counts in the plain and rope dims and
    the largest distance in bf16 steps (adjacent bf16 values of one sign differ by 1 in their bits)."""
    diff = y != want
    steps = (y.view(torch.int16).int() - want.view(torch.int16).int()).abs()
    return (f"{int(diff[..., :-rope_dims].sum())} of {diff[..., :-rope_dims].numel()} plain dims and "
            f"{int(diff[..., -rope_dims:].sum())} of {diff[..., -rope_dims:].numel()} rope dims differ, "
            f"at most {int(steps.max())} bf16 steps")


# rms_norm and hadamard ---------------------------------------------------------------------------
def test_rms_norm_output_has_unit_rms_before_the_weight():
    g = torch.Generator().manual_seed(3)
    x = torch.randn(4, 300, generator=g, dtype=torch.float64) * torch.tensor([[0.01], [1], [30], [1e3]])
    w = torch.rand(300, generator=g, dtype=torch.float64) + 0.5
    with compute_dtype(torch.float64):
        y = NR.rms_norm(x, w, eps=1e-12)
    assert torch.allclose((y / w).square().mean(-1), torch.ones(4, dtype=torch.float64), atol=1e-9)
    xb, wb = x.bfloat16(), w.bfloat16()
    # a power-of-two scale is exact in bf16 and cancels in the norm
    assert torch.equal(NR.rms_norm(xb * 4, wb, 0.0), NR.rms_norm(xb, wb, 0.0))


def test_sylvester_matrix_is_the_bit_rule_and_orthogonal():
    h = HD.sylvester(128, torch.float64)
    want = torch.tensor([[(-1) ** bin(i & j).count("1") for j in range(128)] for i in range(128)], dtype=torch.float64)
    assert torch.equal(h, want)
    assert torch.equal(h @ h.T, 128 * torch.eye(128, dtype=torch.float64))


def test_hadamard_twice_is_identity_and_keeps_norms():
    g = torch.Generator().manual_seed(4)
    x = torch.randn(3, 2, 128, generator=g, dtype=torch.float64)
    with compute_dtype(torch.float64):
        y = HD.hadamard(x)
        assert torch.allclose(HD.hadamard(y), x, atol=1e-12)
    assert torch.allclose(y.norm(dim=-1), x.norm(dim=-1), rtol=1e-12)
    e5 = torch.zeros(128, dtype=torch.float64)
    e5[5] = 1
    with compute_dtype(torch.float64):
        assert torch.allclose(HD.hadamard(e5), HD.sylvester(128, torch.float64)[5] / math.sqrt(128))


@needs_triton
def test_hadamard_kernel_twice_is_identity():
    g = torch.Generator().manual_seed(5)
    x = torch.randn(40, 128, generator=g).bfloat16()
    y = triton_fn("hadamard")(x=triton_fn("hadamard")(x=x))
    assert torch.allclose(y.float(), x.float(), rtol=2 ** -6, atol=2 ** -6)


@needs_triton
def test_hadamard_butterfly_is_the_sylvester_product():
    """Config FWHT (kernels/common.py fwht128_rows: seven butterfly stages) against the tensor-core product with the
    Sylvester tile: each within one bf16 rounding of the exact fp64 rotation (they sum in different orders), and
    bit-equal on unit vectors (a column of H: no sums to round)."""
    fn = triton_fn("hadamard")
    cfg = {"BLOCK_M": 16, "num_warps": 4, "num_stages": 1}
    g = torch.Generator().manual_seed(6)
    x = torch.randn(37, 128, generator=g).bfloat16()
    exact = x.double() @ HD.sylvester(128, torch.float64) / math.sqrt(128)
    for fwht in (False, True):
        y = fn(x=x, config={**cfg, "FWHT": fwht}).double()
        assert ((y - exact).abs() <= exact.abs() * 2 ** -8 + 1e-6).all(), fwht
    e = torch.eye(128)[:40].bfloat16()
    assert torch.equal(fn(x=e, config={**cfg, "FWHT": True}), fn(x=e, config={**cfg, "FWHT": False}))


def test_hadamard_default_form_follows_the_switch(monkeypatch):
    """The hadamard op's default config takes its form (FWHT) from the kernels' switch (KERNELBENCH_HADAMARD, read at
    import into kernels/common.py HADAMARD_BUTTERFLY): one setting for every Hadamard in the step."""
    import triton.language as tl
    from kernelbench.kernels import common, norm
    for on in (True, False):
        monkeypatch.setattr(common, "HADAMARD_BUTTERFLY", tl.constexpr(on))
        assert norm.hadamard_default({"T": 4, "H": 8})["FWHT"] is on


@needs_triton
@pytest.mark.parametrize("op", ["indexer_q", "compressor_step"])
def test_hadamard_matrix_switch_keeps_the_kernels_within_tolerance(op, monkeypatch):
    """kernels/common.py HADAMARD_BUTTERFLY off (KERNELBENCH_HADAMARD=matrix: every Hadamard of the indexer query and
    the rotated compressor entries as the product with the Sylvester tile; the butterfly is the default, which the
    other tests run): the kernels still pass their references on drawn cases. (Interpreter: the kernels read the
    switch when they run. The hadamard op takes its form from its config FWHT, whose default follows the switch:
    test_hadamard_default_form_follows_the_switch; both forms: test_hadamard_butterfly_is_the_sylvester_product.)"""
    import triton.language as tl
    from kernelbench.kernels import common
    if not INTERPRET:
        pytest.skip("the switch is read at compile time on a GPU; scripts patch the installed copy there")
    monkeypatch.setattr(common, "HADAMARD_BUTTERFLY", tl.constexpr(False))
    verify_drawn(op)


# kernels vs reference ----------------------------------------------------------------------------
@needs_triton
@pytest.mark.parametrize("op", ["rms_norm", "hadamard", "rope", "head_rms_norm_rope"])
def test_kernel_matches_reference(op):
    verify_drawn(op)


@needs_triton
def test_kernels_at_a_flash_shape():
    for op, p in (("rms_norm", {"M": 2, "N": 4096}), ("head_rms_norm_rope", {"model": "flash", "T": 2, "Hl": 8,
                  "Dh": 512, "R": 64, "L": 1048576, "compressed": True})):
        verify(op, p, "outliers", 7, "contiguous")


# bad input -----------------------------------------------------------------------------------------
BAD = [
    ("rms_norm", dict(x=torch.ones(2, 8, dtype=torch.bfloat16), weight=torch.ones(7, dtype=torch.bfloat16), eps=1e-6),
     ValueError, "must agree"),
    ("hadamard", dict(x=torch.ones(2, 64, dtype=torch.bfloat16)), ValueError, "128"),
    ("rope", dict(x=torch.ones(2, 1, 64, dtype=torch.bfloat16), positions=torch.zeros(2, dtype=torch.int64),
                  freqs=torch.ones(16)), ValueError, "freqs"),
    ("rope", dict(x=torch.ones(2, 1, 64, dtype=torch.bfloat16), positions=torch.zeros(3, dtype=torch.int64),
                  freqs=torch.ones(32)), ValueError, "positions"),
    ("head_rms_norm_rope", dict(q=torch.ones(2, 64, dtype=torch.bfloat16), positions=torch.zeros(2, dtype=torch.int64),
                                freqs=torch.ones(32), eps=1e-6), ValueError, "T, Hl, Dh"),
]


@pytest.mark.parametrize("impl", ["reference", pytest.param("triton", marks=needs_triton)])
@pytest.mark.parametrize("op,inputs,exc,msg", BAD, ids=[f"{b[0]}-{b[3]}" for b in BAD])
def test_bad_input_is_a_clear_error(impl, op, inputs, exc, msg):
    with pytest.raises(exc, match=msg):
        registry.get_impl(op, impl).fn(**inputs)


@needs_triton
def test_kernel_rejects_fp32_activations():
    with pytest.raises(TypeError, match="bfloat16"):
        triton_fn("rms_norm")(x=torch.ones(2, 8), weight=torch.ones(8, dtype=torch.bfloat16), eps=1e-6)


# sm_120 ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("all_configs", [False, pytest.param(True, marks=pytest.mark.slow)])
@pytest.mark.parametrize("shape_set", ["flash-tp8", "pro-tp1"])
def test_sm120_compile_fits_without_spills(shape_set, all_configs):
    from kernelbench.harness import inspector
    ops = ["rms_norm", "hadamard", "rope", "head_rms_norm_rope"]
    reps = inspector.inspect_impls(ops, shape_set=shape_set, target="sm_120", batches=(64,), all_configs=all_configs)
    assert {r["op"] for r in reps} == set(ops)
    for rep in reps:
        assert rep["problems"] == [], (rep["label"], rep["config"], rep["problems"])
