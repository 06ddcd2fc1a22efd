"""kernelbench fidelity: the pure-PyTorch substitutes of DeepSeek's official kernels against independent
definitions, the comparison statistics on synthetic logits, the command's errors, and (only where
KB_OFFICIAL_INFERENCE points at DeepSeek-V4's inference/ folder) an end-to-end run."""
from __future__ import annotations

import math
import os
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

from kernelbench.decoder import fidelity, official
from kernelbench.decoder import official_kernels as K
from kernelbench.cli import main

OFFICIAL = os.environ.get("KB_OFFICIAL_INFERENCE")
E4M3, E8M0 = torch.float8_e4m3fn, torch.float8_e8m0fnu


@pytest.fixture
def bf16_default():
    prev = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)
    yield
    torch.set_default_dtype(prev)


# ------------------------------------------------------------------------------------------------
# Substitute kernels
# ------------------------------------------------------------------------------------------------
def test_act_quant_ue8m0_scale_and_codes(gen):
    x = (torch.randn(4, 256, generator=gen) * torch.tensor([1e-3, 1.0, 30.0, 500.0])[:, None]).to(torch.bfloat16)
    x[0, :128] = 0                                        # an all-zero block: amax floor 1e-4
    codes, s = K.act_quant(x, 128, "ue8m0", E8M0)
    assert codes.dtype == E4M3 and s.dtype == E8M0 and s.shape == (4, 2)
    for r in range(4):
        for b in range(2):
            amax = max(float(x[r, 128 * b:128 * (b + 1)].float().abs().max()), 1e-4)
            want = 2.0 ** math.ceil(math.log2(amax / 448))     # smallest power of two with amax / s <= 448
            assert float(s[r, b]) == want
    deq = (codes.float().view(4, 2, 128) * s.float()[..., None]).view(4, 256)
    # e4m3 keeps 3 mantissa bits: half an ulp is 2^-4 relative (plus the subnormal step near zero)
    err = (deq - x.float()).abs()
    assert bool((err <= 2 ** -4 * x.float().abs() + 2 ** -10 * s.float().repeat_interleave(128, 1)).all())


def test_act_quant_fp32_scale_and_inplace_view(gen):
    x = torch.randn(3, 192, generator=gen).to(torch.bfloat16)
    codes, s = K.act_quant(x, 64)
    amax = x.float().view(3, 3, 64).abs().amax(-1)
    # no rounding of the scale without scale_fmt; the kernel multiplies by the fp32 constant 1/448
    assert torch.equal(s, amax * torch.tensor(1 / 448, dtype=torch.float32))
    assert torch.allclose(s, amax / 448, rtol=1e-6, atol=0)
    y = x.clone()
    view = y[:, :128]                                         # non-contiguous, as the official kv[..., :-rd]
    out = K.act_quant(view, 64, "ue8m0", E8M0, True)
    assert out is view and torch.equal(y[:, 128:], x[:, 128:])       # only the view changed
    c2, s2 = K.act_quant(x[:, :128].contiguous(), 64, "ue8m0", E8M0)
    assert torch.equal(y[:, :128], (c2.float().view(3, 2, 64) * s2.float()[..., None]).view(3, 128).to(torch.bfloat16))


def test_round_e2m1_hand_checked():
    v = torch.tensor([0.2, 0.25, 0.3, 0.75, 1.25, 1.75, 2.5, 2.6, 3.5, 5.0, 5.1, -0.75, -5.0, 6.0])
    want = [0.0, 0.0, 0.5, 1.0, 1.0, 2.0, 2.0, 3.0, 4.0, 4.0, 6.0, -1.0, -4.0, 6.0]   # ties to the even code
    assert K.round_e2m1(v).tolist() == want


def test_fp4_act_quant_pack_roundtrip_and_inplace(gen):
    x = torch.randn(2, 64, generator=gen).to(torch.bfloat16) * 3
    codes, s = K.fp4_act_quant(x, 32)
    assert codes.dtype == torch.float4_e2m1fn_x2 and codes.shape == (2, 32) and s.dtype == E8M0
    vals = K.decode_e2m1(codes)
    assert set(vals.abs().unique().tolist()) <= set(K.FP4_VALUES)
    amax = x.float().view(2, 2, 32).abs().amax(-1)
    assert torch.equal(s.float(), torch.exp2(torch.ceil(torch.log2(amax / 6))))
    y = x.clone()
    K.fp4_act_quant(y, 32, True)
    assert torch.equal(y, (vals.view(2, 2, 32) * s.float()[..., None]).view(2, 64).to(torch.bfloat16))


def _dequant_blocks(w: torch.Tensor, s: torch.Tensor, rows: int, cols: int) -> torch.Tensor:
    return w.double() * s.double().repeat_interleave(rows, 0)[:w.shape[0]].repeat_interleave(cols, 1)[:, :w.shape[1]]


def test_fp8_gemm_matches_dequantise_then_matmul(gen, bf16_default):
    a = torch.randn(5, 384, generator=gen) * 2
    codes, sa = K.act_quant(a, 128, "ue8m0", E8M0)
    w = (torch.randn(200, 384, generator=gen) * 16).clamp(-448, 448).to(E4M3)
    ws = torch.exp2(torch.randint(-9, -5, (2, 3), generator=gen).float()).to(E8M0)
    want = _dequant_blocks(codes, sa, 1, 128) @ _dequant_blocks(w, ws, 128, 128).t()
    for gemm in (K.fp8_gemm, K.make_kernel_module(precise=True).fp8_gemm):
        got = gemm(codes, sa, w, ws, E8M0)
        assert got.dtype == torch.bfloat16 and got.shape == (5, 200)
        assert ((got.double() - want).abs() <= 2 ** -8 * want.abs() + 1e-6).all()   # one bf16 rounding


def test_fp4_gemm_matches_dequantise_then_matmul(gen, bf16_default):
    a = torch.randn(3, 256, generator=gen)
    codes, sa = K.act_quant(a, 128, "ue8m0", E8M0)
    nib = torch.randint(0, 16, (64, 256), generator=gen)
    packed = (nib[:, 0::2] | (nib[:, 1::2] << 4)).to(torch.uint8).view(torch.float4_e2m1fn_x2)
    table = torch.tensor(K.FP4_VALUES + tuple(-v for v in K.FP4_VALUES), dtype=torch.float64)
    wv = table[nib]                                                   # low nibble = even element
    ws = torch.exp2(torch.randint(-6, -2, (64, 8), generator=gen).float()).to(E8M0)
    want = _dequant_blocks(codes, sa, 1, 128) @ _dequant_blocks(wv, ws, 1, 32).t()
    got = K.fp4_gemm(codes, sa, packed, ws, E8M0)
    assert ((got.double() - want).abs() <= 2 ** -8 * want.abs() + 1e-6).all()


def test_sparse_attn_with_sink_matches_dense_masked_softmax(gen):
    b, m, h, d, n, k = 2, 3, 4, 64, 10, 5
    q = torch.randn(b, m, h, d, generator=gen).to(torch.bfloat16)
    kv = torch.randn(b, n, d, generator=gen).to(torch.bfloat16)
    sink = torch.randn(h, generator=gen)
    idx = torch.stack([torch.randperm(n, generator=gen)[:k] for _ in range(b * m)]).view(b, m, k).int()
    idx[0, 0, 3:] = -1                                              # masked entries
    scale = d ** -0.5
    got = K.sparse_attn(q, kv, sink, idx, scale)
    # dense: all n rows, masked to the selected ones, plus a sink column that carries no value
    logits = torch.einsum("bmhd,bnd->bmhn", q.double(), kv.double()) * scale
    sel = torch.zeros(b, m, n, dtype=torch.bool)
    for i in range(b):
        for j in range(m):
            sel[i, j, [t for t in idx[i, j].tolist() if t >= 0]] = True
    logits = logits.masked_fill(~sel[:, :, None, :], float("-inf"))
    full = torch.cat([logits, sink.double()[None, None, :, None].expand(b, m, h, 1)], dim=-1).softmax(-1)
    want = torch.einsum("bmhn,bnd->bmhd", full[..., :n], kv.double())
    assert got.dtype == torch.bfloat16
    assert ((got.double() - want).norm() / want.norm()) < 4e-3          # bf16 P and bf16 output
    # the sink takes mass: dropping it would give a visibly larger output
    no_sink = torch.einsum("bmhn,bnd->bmhd", logits.softmax(-1), kv.double())
    assert ((no_sink - want).norm() / want.norm()) > 1e-2


def test_sparse_attn_official_rounding_blocks_of_64():
    """As the official kernel: P rounded to bf16 for P @ V relative to the running max of 64-entry blocks,
    the row sum in fp32. 64 entries scoring 0 (value e0) then one scoring 1 (value e1), scale 1."""
    bf = lambda x: float(torch.tensor(x, dtype=torch.float32).bfloat16().float())   # noqa: E731
    f32 = lambda x: float(torch.tensor(x, dtype=torch.float32))                    # noqa: E731
    q = torch.tensor([0.0, 1.0]).bfloat16().view(1, 1, 1, 2)
    kv = torch.tensor([[1.0, 0.0]] * 64 + [[0.0, 1.0]]).bfloat16()[None]
    sink = torch.tensor([-1e4])
    e = f32(math.exp(-1.0))
    den = f32(f32(64 * e) + 1.0)
    order = torch.arange(65, dtype=torch.int32).view(1, 1, 65)
    got = K.sparse_attn(q, kv, sink, order, 1.0)
    assert got.flatten().float().tolist() == [bf(f32(64 * e) / den), bf(1.0 / den)]    # block 0 weights exactly 1
    first = torch.cat([order[..., 64:], order[..., :64]], dim=-1)
    got = K.sparse_attn(q, kv, sink, first, 1.0)
    assert got.flatten()[0].item() == bf(f32(64 * bf(e)) / den)                       # bf16(e^-1) each


def test_hc_split_sinkhorn_formula_and_doubly_stochastic(gen):
    hc = 4
    mixes = torch.randn(2, 3, (2 + hc) * hc, generator=gen)
    scale, base = torch.rand(3, generator=gen) + 0.5, torch.randn((2 + hc) * hc, generator=gen) * 0.1
    pre, post, comb = K.hc_split_sinkhorn(mixes, scale, base, hc, 20, 1e-6)
    assert torch.allclose(pre, torch.sigmoid(mixes[..., :hc] * scale[0] + base[:hc]) + 1e-6)
    assert torch.allclose(post, 2 * torch.sigmoid(mixes[..., hc:2 * hc] * scale[1] + base[hc:2 * hc]))
    assert comb.shape == (2, 3, hc, hc)
    assert torch.allclose(comb.sum(-2), torch.ones(2, 3, hc), atol=1e-4)          # columns (normalised last)
    assert torch.allclose(comb.sum(-1), torch.ones(2, 3, hc), atol=1e-2)          # rows, after 20 iterations
    one = K.hc_split_sinkhorn(mixes, scale, base, hc, 1, 1e-6)[2]                 # 1 iteration: softmax + col norm
    sm = (mixes[..., 2 * hc:] * scale[2] + base[2 * hc:]).view(2, 3, hc, hc).softmax(-1) + 1e-6
    assert torch.allclose(one, sm / (sm.sum(-2, keepdim=True) + 1e-6))


def test_hadamard_transform_is_sylvester(gen):
    h2 = torch.tensor([[1.0, 1.0], [1.0, -1.0]])
    H = h2
    for _ in range(6):
        H = torch.kron(H, h2)                                        # 128 x 128, natural order
    x = torch.randn(3, 128, generator=gen)
    assert torch.allclose(K.hadamard_transform(x, 128 ** -0.5), x @ H * 128 ** -0.5, atol=1e-5)


def test_official_state_dequantises_wo_a_and_views_fp4(gen):
    w = (torch.randn(256, 128, generator=gen) * 16).to(E4M3)
    s = torch.tensor([[0.5], [0.25]]).to(E8M0)
    sd = {"layers.0.attn.wo_a.weight": w, "layers.0.attn.wo_a.scale": s,
          "layers.0.ffn.experts.1.w1.weight": torch.tensor([[0x21, -1]], dtype=torch.int8),
          "layers.0.attn.attn_sink": torch.ones(2)}
    out = official.official_state(sd)
    assert set(out) == {"layers.0.attn.wo_a.weight", "layers.0.ffn.experts.1.w1.weight", "layers.0.attn.attn_sink"}
    wo = out["layers.0.attn.wo_a.weight"]
    assert wo.dtype == torch.bfloat16
    assert torch.equal(wo[:128], (w[:128].float() * 0.5).bfloat16()) and torch.equal(wo[128:], (w[128:].float() * 0.25).bfloat16())
    e = out["layers.0.ffn.experts.1.w1.weight"]
    assert e.dtype == torch.float4_e2m1fn_x2
    assert K.decode_e2m1(e).tolist() == [[0.5, 1.0, -6.0, -6.0]]   # 0x21: low nibble 1 (0.5), high 2 (1.0)


# ------------------------------------------------------------------------------------------------
# Statistics
# ------------------------------------------------------------------------------------------------
def test_agreement_rel_error_and_decisive_top1():
    ref = torch.tensor([[[10.0, 5.0, 0.0]], [[10.0, 9.8, 0.0]], [[4.0, 1.0, 0.0]]])   # [steps=3, N=1, V=3]
    out = ref.clone()
    out[1, 0] = torch.tensor([9.8, 10.0, 0.0])      # a swap where the gap is 2% (not decisive at 5%)
    out[2, 0] = torch.tensor([1.0, 4.0, 0.0])       # a swap where the gap is 75%: decisive, disagrees
    a = fidelity.agreement("x", ref, out, gap=0.05)
    assert a.n == 3 and a.n_decisive == 2 and a.top1 == 0.5
    e = fidelity.rel_errors(ref, out).flatten().tolist()
    assert e[0] == 0 and math.isclose(e[1], math.sqrt(0.08) / math.sqrt(100 + 9.8 ** 2), rel_tol=1e-6)   # fp32 inputs
    assert math.isclose(a.median, e[1]) and math.isclose(a.max, e[2])
    assert a.per_step_median == pytest.approx(e)
    assert fidelity.agreement("x", ref, out, gap=0.01).n_decisive == 3


def test_verdict_ratio_and_points():
    floor = fidelity.Agreement("f", 10, 0.04, 0.1, 10, 0.95)
    good = fidelity.Agreement("o", 10, 0.049, 0.2, 10, 0.94)
    v = fidelity.verdict(good, floor)
    assert v.ratio == pytest.approx(1.225) and v.top1_points == pytest.approx(1.0) and v.passed
    assert not fidelity.verdict(fidelity.Agreement("o", 10, 0.051, 0.2, 10, 0.95), floor).passed     # 1.275x
    assert not fidelity.verdict(fidelity.Agreement("o", 10, 0.04, 0.2, 10, 0.92), floor).passed      # 3 points
    zero = fidelity.verdict(good, fidelity.Agreement("f", 10, 0.0, 0.0, 10, 1.0))
    assert zero.ratio == math.inf and not zero.passed


# ------------------------------------------------------------------------------------------------
# The command's errors
# ------------------------------------------------------------------------------------------------
def _run(*args):
    return CliRunner().invoke(main, ["fidelity", *args], catch_exceptions=False)


def test_command_missing_model_py(tmp_path):
    (tmp_path / "kernel.py").write_text("")
    r = _run("--official", str(tmp_path), "--checkpoint", str(tmp_path))
    assert r.exit_code != 0 and "model.py is missing" in r.output


def test_command_missing_official_dir(tmp_path):
    r = _run("--official", str(tmp_path / "nope"), "--checkpoint", str(tmp_path))
    assert r.exit_code != 0 and "no such directory" in r.output


def test_command_missing_checkpoint(tmp_path):
    for f in ("model.py", "kernel.py"):
        (tmp_path / f).write_text("")
    r = _run("--official", str(tmp_path), "--checkpoint", str(tmp_path / "ck"))
    assert r.exit_code != 0 and "checkpoint" in r.output and "does not exist" in r.output


def test_command_official_kernels_need_tilelang(tmp_path, monkeypatch):
    monkeypatch.setattr(official, "tilelang_available", lambda: False)
    r = _run("--official", str(tmp_path), "--checkpoint", str(tmp_path), "--kernels", "official")
    assert r.exit_code != 0 and "tilelang" in r.output


def test_command_triton_on_cpu_needs_interpreter(tmp_path, monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    r = _run("--official", str(tmp_path), "--checkpoint", str(tmp_path), "--impl", "triton")
    assert r.exit_code != 0 and "TRITON_INTERPRET=1" in r.output


def test_incompatible_config_is_one_line(tmp_path):
    from kernelbench.config import TINY
    mod = type("M", (), {"ModelArgs": object})
    with pytest.raises(official.OfficialError, match="kv_fp8_group=32"):
        official.model_args(mod, TINY.replace(kv_fp8_group=32), 1, 64)


# ------------------------------------------------------------------------------------------------
# End to end, against the real official code (never in this repository)
# ------------------------------------------------------------------------------------------------
@pytest.mark.skipif(not OFFICIAL, reason="set KB_OFFICIAL_INFERENCE to DeepSeek-V4's inference/ folder "
                                         "(model.py, kernel.py) to run the end-to-end fidelity check")
def test_end_to_end_tiny(tmp_path):
    from kernelbench.decoder import checkpoint
    from kernelbench.config import TINY

    ck = checkpoint.write_random(tmp_path / "ck", TINY, seed=3)
    s = fidelity.setup(Path(OFFICIAL), ck, "reference", "cpu", "substitute", max_batch=1, max_seq_len=28)
    rep = fidelity.run_model_mode(s, 1, 24, 2)
    assert rep.ours.n == 3 and math.isfinite(rep.ours.median)
    assert rep.floor.median <= rep.ours.median < 0.5           # same model: far below random logits (~1.4)
    assert rep.shared_clamp_values > 0 and rep.shared_clamp_hits == 0
    # 24 tokens x 4 heads = 96 q-norm scales: no scalar tail in torch's CPU rsqrt (a multiple of 32)
    assert fidelity.caveats(TINY, 1, 24, 0, "cpu") == []
    mods = fidelity.run_modules_mode(s, 1, 24)
    by_op = {}
    for r in mods:
        by_op.setdefault(r.op, []).append(r)
    # every module agrees with the official one, attention included (issue 11)
    for op in ("rms_norm", "mhc_pre", "mhc_post", "moe_gate", "moe_layer", "compressor_prefill", "lm_head",
               "fp8_linear"):
        assert op in by_op and all(r.passed for r in by_op[op]), (op, [(r.module, r.rel_fro) for r in by_op[op]])
