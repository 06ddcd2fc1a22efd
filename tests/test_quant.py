"""FP8 / FP4 quantization: properties of the reference that do not trust it, kernel == reference
(interpreter), bad inputs."""
from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings

from kernelbench.reference import quant as Q
from _quant_moe_util import check_against_reference, poisoned_empty, spec_and_impl

E4M3_GRID = torch.arange(0, 127, dtype=torch.uint8).view(torch.float8_e4m3fn).double()   # all finite >= 0 values
E2M1_MAG = torch.tensor([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0], dtype=torch.float64)


def _nearest_even(v: torch.Tensor, grid: torch.Tensor) -> torch.Tensor:
    """Brute-force round-to-nearest-even of |v| onto a sorted grid whose index parity is the code parity."""
    d = (v.abs().double()[..., None] - grid).abs()
    best = d.min(-1, keepdim=True).values
    cand = (d == best)
    # among tied candidates take the even index (the even code)
    idx = torch.where(cand, torch.arange(grid.numel()), 10 ** 6)
    even = torch.where(idx % 2 == 0, idx, 10 ** 6).min(-1).values
    pick = torch.where(even < 10 ** 6, even, idx.min(-1).values)
    return grid[pick] * torch.where(torch.signbit(v), -1.0, 1.0).double()


@pytest.mark.parametrize("values", ["normal", "outliers", "tiny", "ties", "large"])
def test_fp8_act_quant_is_nearest_e4m3_with_smallest_pow2_scale(values, gen):
    from kernelbench.ops.quant import act_values
    x = act_values((4, 512), gen, values, 128, "fp8")
    q, s = Q.act_quant_fp8(x, 128, "ue8m0")
    xg = x.double().view(4, 4, 128)
    amax = xg.abs().amax(-1).clamp_min(1e-4)
    # power of two, and the smallest one with amax / s <= 448
    m, _ = torch.frexp(s.double())
    assert bool((m == 0.5).all())
    assert bool((amax / s <= 448).all()) and bool((amax / (s / 2) > 448).all())
    # codes are the nearest e4m3 value of x / s (ties to even)
    want = _nearest_even((xg / s[..., None].double()).clamp(-448, 448), E4M3_GRID)
    got = q.double().view(4, 4, 128)
    assert torch.equal(got.abs(), want.abs())
    # dequantization error within half a step of the format (relative 2^-4) or half a subnormal step
    err = (got * s[..., None] - xg).abs()
    assert bool((err <= torch.maximum(xg.abs() * 2.0 ** -4, s[..., None].double() * 2.0 ** -10)).all())


def test_fp8_fp32_scale_format(gen):
    x = (torch.randn(3, 256, generator=gen) * 5).bfloat16()
    q, s = Q.act_quant_fp8(x, 128, "fp32")
    amax = x.float().view(3, 2, 128).abs().amax(-1)
    assert torch.equal(s, amax / 448)
    assert q.float().abs().max() <= 448 and (q.float().view(3, 2, 128).abs().amax(-1) == 448).all()


def test_fp8_simulate_is_dequant_of_quant(gen):
    x = (torch.randn(5, 448, generator=gen) * 3).bfloat16()
    q, s = Q.act_quant_fp8(x, 64, "ue8m0")
    want = (q.float().view(5, 7, 64) * s[..., None]).view(5, 448).bfloat16()
    assert torch.equal(Q.fp8_simulate(x, 64), want)
    assert not torch.equal(Q.fp8_simulate(x, 64), x)      # it really rounds (to 3 mantissa bits)


def test_e2m1_round_to_nearest_even_table():
    v = torch.tensor([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 0.3, 5.1, -0.25, -2.6, 6.0])
    assert Q.e2m1_encode(v).tolist() == [0, 2, 2, 4, 4, 6, 6, 1, 7, 8, 13, 7]
    assert Q.e2m1_decode(torch.arange(16, dtype=torch.uint8)).tolist() == list(Q.E2M1_VALUES)


@pytest.mark.parametrize("values", ["normal", "ties", "tiny", "outliers"])
def test_fp4_act_quant_properties(values, gen):
    from kernelbench.ops.quant import act_values
    x = act_values((3, 128), gen, values, 32, "fp4")
    q, s = Q.act_quant_fp4(x, 32)
    assert q.shape == (3, 64) and s.shape == (3, 4) and q.dtype == torch.uint8
    m, _ = torch.frexp(s.double())
    assert bool((m == 0.5).all())
    amax = x.double().view(3, 4, 32).abs().amax(-1).clamp_min(6 * 2.0 ** -126)
    assert bool((amax / s <= 6).all()) and bool((amax / (s / 2) > 6).all())
    # unpack by hand: low nibble = even element; decode through the SPEC's code table
    codes = torch.stack((q & 15, q >> 4), -1).view(3, 128).long()
    table = torch.tensor(Q.E2M1_VALUES, dtype=torch.float64)
    vals = table[codes].view(3, 4, 32)
    want = _nearest_even((x.double().view(3, 4, 32) / s[..., None].double()).clamp(-6, 6), E2M1_MAG)
    assert torch.equal(vals.abs(), want.abs())
    assert torch.equal(Q.fp4_simulate(x, 32), (vals * s[..., None].double()).view(3, 128).bfloat16())


def test_fp4_packing_low_nibble_is_even_element():
    x = torch.zeros(1, 32, dtype=torch.bfloat16) + 0.5
    x[0, 0], x[0, 1] = 6.0, 1.0          # amax 6 -> scale 1
    q, s = Q.act_quant_fp4(x)
    assert s.item() == 1.0 and q[0, 0].item() == (7 | (2 << 4))


@pytest.mark.parametrize("N", [128, 200])
def test_weight_quantizers_roundtrip(N, gen):
    w = torch.randn(N, 256, generator=gen) * 0.02
    q, s = Q.quant_fp8_weight(w)
    nb = -(-N // 128)
    assert q.dtype == torch.float8_e4m3fn and s.dtype == torch.float8_e8m0fnu and s.shape == (nb, 2)
    blocks = torch.zeros(nb * 128, 256)
    blocks[:N] = w
    amax = blocks.view(nb, 128, 2, 128).abs().amax((1, 3))
    sf = s.float()
    assert bool((amax / sf <= 448).all()) and bool((amax / (sf / 2) > 448).all())
    err = (Q.dequant_fp8_weight(q, s) - w.double()).abs()
    assert bool((err <= w.double().abs() * 2.0 ** -4 + 2.0 ** -10 * sf.max().item()).all())
    p, s4 = Q.quant_fp4_weight(w)
    assert p.shape == (N, 128) and s4.shape == (N, 8) and s4.dtype == torch.float8_e8m0fnu
    deq = Q.dequant_fp4_weight(p, s4)
    rel = (deq - w.double()).norm() / w.double().norm()
    assert 0.02 < rel < 0.2                              # e2m1 has 1 mantissa bit: a real, bounded error
    assert torch.equal(Q.unpack_fp4(Q.pack_fp4(Q.unpack_fp4(p))), Q.unpack_fp4(p))


# ---- kernels == reference --------------------------------------------------------------------------------------
@pytest.mark.parametrize("op", ["act_quant_fp8", "fp8_simulate", "act_quant_fp4", "fp4_simulate"])
def test_kernel_matches_reference(op, monkeypatch):
    poisoned_empty(monkeypatch)
    spec, _ = spec_and_impl(op)

    @settings(max_examples=5)
    @given(spec.strategy())
    def run(p):
        for values in spec.value_modes:
            check_against_reference(op, p, values)
    run()


def test_kernel_config_space_and_real_shape(monkeypatch):
    poisoned_empty(monkeypatch)
    spec, impl = spec_and_impl("act_quant_fp8")
    p = spec.shape_cases("flash-tp8")[0]
    for cfg in ({"GB": 1, "num_warps": 1}, {"GB": 16, "num_warps": 4}):
        check_against_reference("act_quant_fp8", {**p, "M": 2}, "outliers", config=cfg)


def test_bad_inputs():
    _, aq = spec_and_impl("act_quant_fp8")
    _, aq4 = spec_and_impl("act_quant_fp4")
    with pytest.raises(TypeError, match="bfloat16"):
        aq.fn(torch.randn(2, 128))
    with pytest.raises(ValueError, match="group"):
        aq.fn(torch.randn(2, 100).bfloat16())
    with pytest.raises(ValueError, match="scale_fmt"):
        aq.fn(torch.randn(2, 128).bfloat16(), 128, "e5m2")
    with pytest.raises(ValueError, match="2-D"):
        aq4.fn(torch.randn(2, 2, 32).bfloat16())
    with pytest.raises(TypeError):
        Q.act_quant_fp8(torch.randn(2, 128))
    with pytest.raises(ValueError, match="power of two"):
        Q.to_e8m0(torch.tensor([3.0]))
