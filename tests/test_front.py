"""attention_front (wq_a + q_norm, wkv + kv_write in one launch): the kernel against its reference (the parts'
references composed), against the separate Triton kernels it replaces, and its launches."""
import pytest
import torch

from kernelbench import registry
from kernelbench.harness.inspector import capture
from kernelbench.kernels import linear as KL
from _kernel_check import needs_triton, verify, verify_drawn

registry.load_builtin()
pytestmark = needs_triton

SMALL = {"K": 256, "NQ": 256, "DH": 128, "R": 64, "W": 16, "ctx": 40, "compressed": True}


def test_attention_front_matches_reference_drawn():
    verify_drawn("attention_front")


@pytest.mark.parametrize("m,values", [(1, "outliers"), (17, "normal"), (3, "boundary")])
def test_attention_front_matches_reference(m, values):
    verify("attention_front", {**SMALL, "M": m, "ragged": m > 1}, values, 5, "contiguous")


def _inputs(m, seed=2):
    spec = registry.get_op("attention_front")
    return spec.make_inputs({**SMALL, "M": m, "ragged": m > 1}, torch.Generator().manual_seed(seed), "cpu", "normal")


# the fused ops' GEMM configs against fp8_linear's with the same tiles: tl.dot tiles (fp8_linear PATH v1), and at one
# token fp8_linear's BM = 1 FMA GEMV (PATH v2), two K blocks a step
GEMV = {"BM": 1, "BN": 32, "NB": 2, "num_warps": 4, "num_stages": 1, "RB": 1}
LIN_GEMV = {"PATH": "v2", "X_OPERAND": "B"}


def _gemm_cfgs(m, split, gemv):
    if gemv:                        # K = 256: two K blocks, NB of them a step in each of the `split` parts
        g = {**GEMV, "SPLIT": split, "NB": 2 // split}
        return g, {**g, **LIN_GEMV}
    cfg = {"BM": 16, "BN": 32, "SPLIT": split, "num_warps": 4, "num_stages": 2, "RB": 4}
    return cfg, cfg


@pytest.mark.parametrize("m,split,gemv", [(1, 2, False), (17, 2, False), (3, 1, False), (1, 2, True), (1, 1, True),
                                          (3, 2, True)])
def test_attention_front_is_the_separate_kernels_in_one_launch(m, split, gemv, monkeypatch):
    """With the same GEMM config the fused kernel's kv and window ring are the separate fp8_linear + kv_write
    kernels' bit for bit (same tiles or the same GEMV, same split order, same kv_write arithmetic) and qr is
    fp8_linear + rms_norm up to the norm's summation order; it reruns bit for bit, leaves every ticket at zero, and is
    one launch when x is quantized in the GEMM (M <= PROLOGUE_QUANT_MAX_M, or the BM 1 GEMV at any M: it reads bf16
    rows, as fp8_linear's), two otherwise. The tensor-core tile with PREFETCH "staged" (its scales a step ahead) is
    the same result bit for bit."""
    monkeypatch.setattr(KL, "PROLOGUE_QUANT_MAX_M", 1)
    cfg, lin_cfg = _gemm_cfgs(m, split, gemv)
    fused = registry.get_impl("attention_front", "triton").fn
    lin, norm, kvw = (registry.get_impl(op, "triton").fn for op in ("fp8_linear", "rms_norm", "kv_write"))
    a, b = _inputs(m), _inputs(m)
    qr, kv = fused(**a, config=cfg)
    y = lin(b["x"], b["wq_a"], b["wq_a_scale"], config=lin_cfg)
    qr_sep = norm(y, b["q_norm"], b["eps"])
    kv_sep = kvw(lin(b["x"], b["wkv"], b["wkv_scale"], config=lin_cfg), b["kv_norm"], b["eps"], b["positions"],
                 b["seq_ids"], b["freqs"], b["window_cache"])
    assert torch.equal(kv, kv_sep) and torch.equal(a["window_cache"], b["window_cache"])
    assert ((qr.float() - qr_sep.float()).abs() <= 2 ** -7 * qr_sep.float().abs() + 1e-6).all()
    assert all(int(t.abs().sum()) == 0 for t in KL._TICKETS.values())
    qr2, kv2 = fused(**_inputs(m), config=cfg)
    assert torch.equal(qr2, qr) and torch.equal(kv2, kv)
    if not gemv:
        qr3, kv3 = fused(**_inputs(m), config={**cfg, "PREFETCH": "staged"})
        assert torch.equal(qr3, qr) and torch.equal(kv3, kv)
    with capture() as launches:
        fused(**_inputs(m), config=cfg)
    names = [l.name.split(":")[1] for l in launches]
    assert names[-1] == "_attention_front_kernel" and len(names) == (1 if m == 1 or gemv else 2)


@pytest.mark.parametrize("m,gemv,nq", [(1, True, 256), (1, True, 512), (3, True, 512), (17, False, 512)])
def test_attention_front_q_tail_in_one_pass(m, gemv, nq):
    """Config Q_NORM "row" (the q tail's rows whole in registers, q_norm's weight loaded before the row ticket): kv
    and the window ring are the chunked tail's bit for bit, qr matches the reference (check_example with the config)
    and the chunked tail's up to the norm's summation order (NQ = 512: two 256-column chunks there); tickets end at
    zero. Without the key a tile with RB 1 takes "row" (bit-equal to it), RB 4 "chunks". Unknown modes and rows over
    Q_ROW_VALUES values a thread are refused before any launch."""
    from kernelbench.harness.verify_check import Example, check_example
    from kernelbench.kernels import front as KF
    cfg = _gemm_cfgs(m, 2, gemv)[0]
    params = {**SMALL, "NQ": nq, "M": m, "ragged": m > 1}
    fused = registry.get_impl("attention_front", "triton")

    def inputs():
        return registry.get_op("attention_front").make_inputs(params, torch.Generator().manual_seed(3), "cpu",
                                                              "outliers")
    a, b = inputs(), inputs()
    qr, kv = fused.fn(**a, config={**cfg, "Q_NORM": "chunks"})
    qr1, kv1 = fused.fn(**b, config={**cfg, "Q_NORM": "row"})
    qr2, kv2 = fused.fn(**inputs(), config=cfg)
    assert torch.equal(qr2, qr1 if cfg["RB"] == 1 else qr) and torch.equal(kv2, kv)
    with capture() as launches:          # the interpreter's sums give "row" and "chunks" the same bits: read the launch
        fused.fn(**inputs(), config=cfg)
    assert launches[-1].kwargs["Q_ROW"] == (cfg["RB"] == 1)
    assert torch.equal(kv1, kv) and torch.equal(b["window_cache"], a["window_cache"])
    assert ((qr1.float() - qr.float()).abs() <= 2 ** -7 * qr.float().abs() + 1e-6).all()
    assert all(int(t.abs().sum()) == 0 for t in KL._TICKETS.values())
    ex = Example("attention_front", "triton", params, "outliers", 3, "contiguous", config={**cfg, "Q_NORM": "row"})
    res = check_example(registry.get_op("attention_front"), fused, ex, device="cpu")
    assert res.passed, res.failure
    with pytest.raises(ValueError, match="Q_NORM"):
        fused.fn(**inputs(), config={**cfg, "Q_NORM": "rows"})
    assert KF._q_tail({"Q_NORM": "row", "num_warps": 8}, 16, 1024) == (True, 1024)
    assert KF._q_tail({"num_warps": 8}, 16, 1024) == (False, 256) and KF._q_tail({"num_warps": 4}, 1, 1024)[0]
    with pytest.raises(ValueError, match="a thread"):
        KF._q_tail({"Q_NORM": "row", "num_warps": 4}, 16, 1024)


@pytest.mark.parametrize("m,bm,rb", [(17, 32, 4), (40, 64, 4), (40, 32, 16), (3, 16, 1)])
def test_attention_front_tails_in_a_launch_of_their_own(m, bm, rb):
    """Config TAIL "launch" (the tails after the GEMM, a program per RB rows and half): qr, kv and the window ring
    are the in-kernel tail's bit for bit, for the same tile and the same q tail (both Q_NORM modes); the GEMM launch
    then takes no row ticket (TAIL False) and the tail launch follows it; tickets end at zero. The op's space carries
    it above the GEMV's rows only, on the 32- and 64-row tiles and the default's 16-row tile (BN 64, 8 warps), 4 rows
    a program and each row loaded once; an unknown mode is refused."""
    from kernelbench.kernels import front as KF
    fused = registry.get_impl("attention_front", "triton")
    base = {"BM": bm, "BN": 32, "SPLIT": 2, "num_warps": 4, "num_stages": 2}
    for q_norm in ("chunks", "row"):
        ticket = {**base, "RB": min(rb, bm), "Q_NORM": q_norm}
        launch = {**base, "RB": rb, "Q_NORM": q_norm, "TAIL": "launch"}
        a, b = _inputs(m), _inputs(m)
        qr, kv = fused.fn(**a, config=ticket)
        qr1, kv1 = fused.fn(**b, config=launch)
        assert torch.equal(qr1, qr) and torch.equal(kv1, kv) and torch.equal(b["window_cache"], a["window_cache"])
        assert all(int(t.abs().sum()) == 0 for t in KL._TICKETS.values())
    with capture() as launches:                 # records the launches, runs nothing
        fused.fn(**_inputs(m), config=launch)
    names = [l.name.split(":")[1] for l in launches]
    assert names[-2:] == ["_attention_front_kernel", "_attention_front_tail"]
    assert launches[-2].kwargs["TAIL"] is False and tuple(launches[-1].grid)[:2] == (-(-m // rb), 2)
    with pytest.raises(ValueError, match="TAIL"):
        fused.fn(**_inputs(m), config={**base, "RB": rb, "TAIL": "later"})
    for big in (16, 64):
        space = KF.attention_front_configs({"M": big, "NQ": 1024, "DH": 512, "K": 4096})
        tails = [c for c in space if c.get("TAIL") == "launch"]
        assert tails and all(c["RB"] == 4 and c["Q_NORM"] == "row" for c in tails)
        assert all(c["BM"] >= 32 or (c["BM"], c["BN"], c["num_warps"]) == (16, 64, 8) for c in tails)
        assert not any((c["BM"], c["BN"], c["num_warps"]) == (32, 32, 8) for c in tails)   # spills on sm_120
    assert not any(c.get("TAIL") for c in KF.attention_front_configs({"M": 1, "NQ": 1024, "DH": 512, "K": 4096}))


def test_attention_front_default_launches_its_tails_from_16_rows():
    """From TAIL_LAUNCH_MIN_M rows the default's tails run in a launch of their own (session 42: faster in the step
    at 16 and 64 tokens), on the 16-row tile below BIG_TILE_MIN_M rows and on the 64-row tile from there; below
    TAIL_LAUNCH_MIN_M rows the in-kernel tails stay. The defaults at 16 and 64 rows run the two launches and match
    the reference."""
    from kernelbench.kernels import front as KF
    key = {"NQ": 1024, "DH": 512, "K": 4096}
    tails = {"RB": 4, "Q_NORM": "row", "TAIL": "launch"}
    assert KF.attention_front_default({**key, "M": KF.BIG_TILE_MIN_M}) == {
        "BM": 64, "BN": 64, "SPLIT": 4, "num_warps": 8, "num_stages": 4, **tails}
    assert KF.attention_front_default({**key, "M": KF.TAIL_LAUNCH_MIN_M}) == {
        "BM": 16, "BN": 64, "SPLIT": 8, "num_warps": 8, "num_stages": 3, **tails, "XQ": "gemm"}
    assert "XQ" not in KF.attention_front_default({**key, "M": KF.BIG_TILE_MIN_M})   # session 43: x quantized in the
    # 16-row tile's K loop below 64 rows, an act_quant launch from there
    below = KF.attention_front_default({**key, "M": KF.TAIL_LAUNCH_MIN_M - 1})
    assert below["BM"] == 16 and "TAIL" not in below
    for m in (2, 16, 17, 64):
        assert KF.attention_front_default({**key, "M": m}) in KF.attention_front_configs({**key, "M": m})
    for m in (KF.TAIL_LAUNCH_MIN_M, KF.BIG_TILE_MIN_M):
        with capture() as launches:
            registry.get_impl("attention_front", "triton").fn(**_inputs(m))
        names = [l.name.split(":")[1] for l in launches]
        assert names[-2:] == ["_attention_front_kernel", "_attention_front_tail"]
        assert ("_fp8_quant_kernel" in names) == (m >= KF.BIG_TILE_MIN_M), names
        verify("attention_front", {**SMALL, "M": m, "ragged": True}, "normal", 5, "contiguous")


@pytest.mark.parametrize("m,tile", [(17, {"BM": 16, "RB": 4, "TAIL": "launch", "Q_NORM": "row"}),
                                    (20, {"BM": 32, "RB": 16})])
def test_fused_gemms_quantize_x_in_the_gemm_with_config_xq(m, tile):
    """Config XQ "gemm" (x quantized in the GEMM's K loop above one row, no act_quant launch) gives the act_quant
    launch's results bit for bit (the same codes, act_quant_e4m3) in attention_front and attention_q: one launch
    fewer; an unknown XQ is refused, and PATH "split" (whose fp8_linear quantizes as it does) refuses XQ "gemm"."""
    base = {"BN": 32, "SPLIT": 2, "num_warps": 4, "num_stages": 2, **tile}
    front = registry.get_impl("attention_front", "triton").fn
    a, b = _inputs(m), _inputs(m)
    qr, kv = front(**a, config=base)
    qr1, kv1 = front(**b, config={**base, "XQ": "gemm"})
    assert torch.equal(qr1, qr) and torch.equal(kv1, kv) and torch.equal(b["window_cache"], a["window_cache"])
    with capture() as launches:                 # records the launches, runs nothing
        front(**_inputs(m), config={**base, "XQ": "gemm"})
    with capture() as before:
        front(**_inputs(m), config=base)
    names = [l.name.split(":")[1] for l in launches]
    assert "_fp8_quant_kernel" not in names and len(names) == len(before) - 1
    assert [l.kwargs["QUANT"] for l in launches if "_attention_front_kernel" in l.name] == [True]
    with pytest.raises(ValueError, match="XQ='early'"):
        front(**_inputs(m), config={**base, "XQ": "early"})
    spec = registry.get_op("attention_q")
    q_in = spec.make_inputs({**QSMALL, "M": m, "ragged": True}, torch.Generator().manual_seed(4), "cpu", "normal")
    q_cfg = {key: v for key, v in base.items() if key not in ("TAIL", "Q_NORM")}
    attn_q = registry.get_impl("attention_q", "triton").fn
    assert torch.equal(attn_q(**q_in, config={**q_cfg, "XQ": "gemm"}), attn_q(**q_in, config=q_cfg))
    with pytest.raises(ValueError, match="XQ is the fused path's"):
        attn_q(**q_in, config={**q_cfg, "PATH": "split", "XQ": "gemm"})


@pytest.mark.gpu
def test_gpu_config_xq_gemm_equals_the_act_quant_launch_at_flash_shapes():
    """On the GPU at the Flash TP8 rank's 16 and 64 tokens: XQ "gemm" on each fused GEMM's default tile
    (attention_front's shipped default, attention_q's and indexer_q's fused defaults) gives the act_quant launch's
    outputs bit for bit (the same codes; the split-K sum in a fixed order), the window cache included."""
    from kernelbench.kernels import front as KF
    from kernelbench.kernels import indexer as KI
    defaults = {"attention_front": KF.attention_front_default, "attention_q": KF._attention_q_fused_default,
                "indexer_q": KI._fused_default}
    for op, default in defaults.items():
        spec, fn = registry.get_op(op), registry.get_impl(op, "triton").fn
        rows = "T" if op == "indexer_q" else "M"
        cases = [c for c in spec.shape_cases("flash-tp8") if c[rows] in (16, 64) and c.get("Hi", 64) == 64]
        assert {c[rows] for c in cases} == {16, 64}, op
        for case in cases:
            cfg = {**default(case), "XQ": "launch"}     # the act_quant launch, even where the default says "gemm"
            a, b = (spec.make_inputs(case, torch.Generator().manual_seed(7), "cuda", "normal") for _ in range(2))
            want, got = fn(**a, config=cfg), fn(**b, config={**cfg, "XQ": "gemm"})
            want, got = (w if isinstance(w, tuple) else (w,) for w in (want, got))
            assert all(torch.equal(x, y) for x, y in zip(got, want)), (op, case)
            assert all(torch.equal(b[k], a[k]) for k in a if isinstance(a[k], torch.Tensor)), (op, case)


def test_attention_front_bad_inputs():
    fused = registry.get_impl("attention_front", "triton").fn
    a = _inputs(2)
    with pytest.raises(TypeError, match="wq_a"):
        fused(**{**a, "wq_a": a["wq_a"].float()})
    with pytest.raises(ValueError, match="positions and seq_ids"):
        fused(**{**a, "positions": a["positions"][:1]})
    with pytest.raises(ValueError, match="window_cache"):
        fused(**{**a, "window_cache": a["window_cache"][:, :, :64]})
    with pytest.raises(ValueError, match="NB=4"):                 # 2 K blocks per split cannot take 4 a step
        fused(**_inputs(1), config={**GEMV, "SPLIT": 1, "NB": 4})


# attention_q ---------------------------------------------------------------------------------------------------
QSMALL = {"K": 256, "Hl": 2, "Dh": 128, "R": 64, "ctx": 40, "compressed": False}


def test_attention_q_matches_reference_drawn():
    verify_drawn("attention_q")


@pytest.mark.parametrize("m,values", [(1, "outliers"), (17, "normal"), (3, "boundary")])
def test_attention_q_matches_reference(m, values):
    verify("attention_q", {**QSMALL, "M": m, "ragged": m > 1}, values, 5, "contiguous")


@pytest.mark.parametrize("m,split,gemv,split_sum", [(1, 2, False, "tile"), (17, 2, False, "tile"),
                                                   (3, 1, False, "tile"), (1, 2, True, "tile"), (1, 2, True, "head"),
                                                   (3, 2, True, "head")])
def test_attention_q_is_the_separate_kernels_in_one_launch(m, split, gemv, split_sum, monkeypatch):
    """Same GEMM config (tiles, or fp8_linear's GEMV at one token): bit for bit the separate fp8_linear +
    head_rms_norm_rope kernels (the same loop, split order and head arithmetic), whichever program sums a tile's
    split-K partials (SPLIT_SUM "head": the head's last, one ticket stage); one launch at M <= PROLOGUE_QUANT_MAX_M
    and for the GEMV at any M, two otherwise; tickets back at zero. The tensor-core tile with PREFETCH "staged" (its
    scales a step ahead) is the same result bit for bit."""
    monkeypatch.setattr(KL, "PROLOGUE_QUANT_MAX_M", 1)
    cfg, lin_cfg = _gemm_cfgs(m, split, gemv)
    cfg = {**cfg, "SPLIT_SUM": split_sum}
    spec = registry.get_op("attention_q")
    a = spec.make_inputs({**QSMALL, "M": m, "ragged": m > 1}, torch.Generator().manual_seed(4), "cpu", "normal")
    fused = registry.get_impl("attention_q", "triton").fn
    lin, head = (registry.get_impl(op, "triton").fn for op in ("fp8_linear", "head_rms_norm_rope"))
    q = fused(**a, config=cfg)
    y = lin(a["x"], a["weight"], a["weight_scale"], config=lin_cfg).view(m, QSMALL["Hl"], QSMALL["Dh"])
    assert torch.equal(q, head(y, a["positions"], a["freqs"], a["eps"]))
    assert all(int(t.abs().sum()) == 0 for t in KL._TICKETS.values())
    assert torch.equal(fused(**a, config=cfg), q)
    if not gemv:
        assert torch.equal(fused(**a, config={**cfg, "PREFETCH": "staged"}), q)
    with capture() as launches:
        fused(**a, config=cfg)
    names = [l.name.split(":")[1] for l in launches]
    assert names[-1] == "_attention_q_kernel" and len(names) == (1 if m == 1 or gemv else 2)


@pytest.mark.parametrize("m", [1, 17])
def test_attention_q_split_path_is_the_separate_kernels(m):
    """Config PATH "split": fp8_linear at its own config, then head_rms_norm_rope, bit for bit the `triton_parts`
    implementation and within tolerance of the reference; its launches are fp8_linear's then the head kernel's, and
    the fused kernel does not run. The space holds it once, with the fused default's (unused) tile keys; it is the
    default from SPLIT_MIN_M to SPLIT_MAX_M rows only; an unknown PATH and the fused path's own options are refused."""
    from kernelbench.harness.verify_check import Example, check_example
    from kernelbench.kernels.front import attention_q_configs, attention_q_default
    spec = registry.get_op("attention_q")
    a = spec.make_inputs({**QSMALL, "M": m, "ragged": m > 1}, torch.Generator().manual_seed(5), "cpu", "normal")
    fused = registry.get_impl("attention_q", "triton").fn
    split = {**attention_q_default({"M": m, "N": 256, "K": 256}), "PATH": "split"}
    q = fused(**a, config=split)
    assert torch.equal(q, registry.get_impl("attention_q", "triton_parts").fn(**a))
    with capture() as launches:
        fused(**a, config=split)
    names = [l.name.split(":")[1] for l in launches]
    assert names[-1] == "_head_rms_rope_kernel" and "_attention_q_kernel" not in names
    assert any(n.startswith("_fp8_linear") for n in names)
    ex = Example("attention_q", "triton", {**QSMALL, "M": m, "ragged": m > 1}, "outliers", 6, "contiguous",
                 config=split)
    res = check_example(spec, registry.get_impl("attention_q", "triton"), ex)
    assert res.passed, res.failure
    space = attention_q_configs({"M": m, "N": 4096, "K": 1024})
    assert [c for c in space if c.get("PATH") == "split"] == [{**attention_q_default({"M": m, "N": 4096, "K": 1024}),
                                                                "PATH": "split"}]
    from kernelbench.kernels import front as KF
    key = {"N": 4096, "K": 1024}
    assert [attention_q_default({**key, "M": n}).get("PATH") for n in (1, KF.SPLIT_MIN_M, KF.SPLIT_MAX_M,
                                                                    KF.SPLIT_MAX_M + 1, 64)] == [
        None, "split", "split", None, None]
    with pytest.raises(ValueError, match="PATH='both'"):
        fused(**a, config={**split, "PATH": "both"})
    with pytest.raises(ValueError, match="PREFETCH is the fused path's"):
        fused(**a, config={**split, "PREFETCH": "staged"})


def test_attention_q_bad_inputs():
    spec = registry.get_op("attention_q")
    a = spec.make_inputs({**QSMALL, "M": 2, "ragged": True}, torch.Generator().manual_seed(4), "cpu", "normal")
    fused = registry.get_impl("attention_q", "triton").fn
    with pytest.raises(ValueError, match="head_dim"):
        fused(**{**a, "head_dim": 96})
    with pytest.raises(TypeError, match="weight"):
        fused(**{**a, "weight": a["weight"].float()})
    tile = {"BM": 16, "BN": 32, "SPLIT": 2, "num_warps": 4, "num_stages": 2, "RB": 4}
    with pytest.raises(ValueError, match="SPLIT_SUM 'head' is for the one-token GEMV tile"):
        fused(**a, config={**tile, "SPLIT_SUM": "head"})
    with pytest.raises(ValueError, match="SPLIT_SUM='rows'"):
        fused(**a, config={**tile, "SPLIT_SUM": "rows"})
    with pytest.raises(ValueError, match="attention_q: config PREFETCH='ahead'"):
        fused(**a, config={**tile, "PREFETCH": "ahead"})
    gemv = {"BM": 1, "BN": 32, "NB": 1, "SPLIT": 2, "num_warps": 4, "num_stages": 1, "RB": 1}
    with pytest.raises(ValueError, match="attention_q: config PREFETCH 'staged' is for the MMA tiles"):
        fused(**a, config={**gemv, "PREFETCH": "staged"})


def test_attention_q_space_has_one_ticket_stage_beside_each_split_gemv():
    """The config space holds SPLIT_SUM "head" exactly for the one-token GEMV tiles with split K (verify's covering
    set then runs it: a categorical option)."""
    from kernelbench.kernels.front import attention_q_configs
    space = attention_q_configs({"M": 1, "N": 4096, "K": 1024})
    head = [c for c in space if c.get("SPLIT_SUM") == "head"]
    split_gemv = [c for c in space if c["BM"] == 1 and c["SPLIT"] > 1 and "SPLIT_SUM" not in c and "PATH" not in c]
    assert head and len(head) == len(split_gemv)
    assert [{k: v for k, v in c.items() if k != "SPLIT_SUM"} for c in head] == split_gemv
    assert not any(c.get("SPLIT_SUM") for c in attention_q_configs({"M": 16, "N": 4096, "K": 1024}))


def test_attention_q_tolerance_admits_a_scale_flip_and_rejects_real_bugs():
    """The H200 case (M=2, Hl=1, 'large', seed 3941: rel_fro 0.0047 from the GPU's projection, every element in
    atol/rtol) comes from the per-head bf16 RMS scale flipping by one ulp: moving 3% of the reference projection's
    outputs by one bf16 ulp reproduces it on the CPU and must pass; a wrong rotation (positions off by one) or a
    head-scale bug (the norm skipped on one token) must still fail."""
    from kernelbench.harness.testing import error_stats, passes
    from kernelbench.reference.linear import fp8_linear
    from kernelbench.reference.rope import head_rms_norm_rope
    spec = registry.get_op("attention_q")
    p = {"Dh": 128, "Hl": 1, "K": 128, "M": 2, "R": 32, "compressed": False, "ctx": 1, "ragged": False}
    inp = spec.make_inputs(p, torch.Generator().manual_seed(3941), "cpu", "large")
    ref = spec.reference(**inp)
    tol = spec.tolerance(p)["y"]
    y = fp8_linear(inp["x"], inp["weight"], inp["weight_scale"]).float()
    norm = lambda yy, pos=inp["positions"]: head_rms_norm_rope(                    # noqa: E731
        yy.to(torch.bfloat16).view(2, 1, 128), pos, inp["freqs"], inp["eps"])
    gen = torch.Generator().manual_seed(0)
    worst = None
    for _ in range(50):
        moved = torch.rand(y.shape, generator=gen) < 0.03
        sign = torch.randint(0, 2, y.shape, generator=gen) * 2 - 1
        st = error_stats(norm(y + torch.where(moved, sign * y.abs() * 2 ** -8, torch.zeros_like(y))), ref, tol)
        assert passes(st, tol), st
        worst = st if worst is None or st.rel_fro > worst.rel_fro else worst
    assert worst.rel_fro > 2 ** -8            # the case the previous cap (2^-8) rejected
    rotated = norm(y, inp["positions"] + 1)
    assert not passes(error_stats(rotated, ref, tol), tol)
    unnormed = ref.clone()
    unnormed[1] = (y[1].view(1, 128) * 2 ** -10).to(torch.bfloat16)
    assert not passes(error_stats(unnormed, ref, tol), tol)
