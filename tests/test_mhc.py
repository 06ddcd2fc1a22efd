"""mHC: Sinkhorn and the split checked against their definitions, post's orientation, pre's
invariances, head, kernels vs reference in the interpreter, errors, and the sm_120 compile."""
import pytest
import torch

from kernelbench.harness import inspector
from kernelbench import registry
from kernelbench.reference import mhc as M
from kernelbench.reference.precision import compute_dtype
from _kernel_check import needs_triton, verify, verify_drawn

registry.load_builtin()
OPS = ("mhc_pre", "mhc_post", "mhc_post_pre", "mhc_post_pre_norm", "mhc_head")


def inputs(op, params, values="normal", seed=0):
    return registry.get_op(op).make_inputs(params, torch.Generator().manual_seed(seed), "cpu", values)


# Sinkhorn and the split --------------------------------------------------------------------------
def test_sinkhorn_is_near_doubly_stochastic():
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(50, 4, 4, generator=g, dtype=torch.float64) * 1.5   # O(1) logits, as the op's inputs
    with compute_dtype(torch.float64):
        c = M.sinkhorn(logits, 20, 1e-6)
        one = M.sinkhorn(logits, 1, 1e-6)
    assert bool((c > 0).all())
    assert torch.allclose(c.sum(-2), torch.ones(50, 4, dtype=torch.float64), atol=1e-5)   # columns: last step
    assert torch.allclose(c.sum(-1), torch.ones(50, 4, dtype=torch.float64), atol=1e-3)   # rows: converged
    assert torch.allclose(one.sum(-2), torch.ones(50, 4, dtype=torch.float64), atol=1e-5)
    # more iterations only bring the rows closer to 1
    row_err = lambda k: (M.sinkhorn(logits, k, 1e-6).sum(-1) - 1).abs().max()   # noqa: E731
    assert row_err(20) < row_err(3) < row_err(1)


def test_split_ranges_follow_the_definitions():
    g = torch.Generator().manual_seed(1)
    m = torch.randn(7, 24, generator=g, dtype=torch.float64) * 4
    base = torch.randn(24, generator=g, dtype=torch.float64)
    scale = torch.tensor([0.5, 1.5, 2.0], dtype=torch.float64)
    with compute_dtype(torch.float64):
        pre, post, comb = M.split_sinkhorn(m, base, scale, 20, 1e-6)
    assert torch.allclose(pre, torch.sigmoid(m[:, :4] * 0.5 + base[:4]) + 1e-6)
    assert torch.allclose(post, 2 * torch.sigmoid(m[:, 4:8] * 1.5 + base[4:8]))
    # comb's first step is a softmax over each row of the 4x4 logits m[8 + 4i + j]
    with compute_dtype(torch.float64):
        first = M.sinkhorn((m[:, 8:] * 2.0 + base[8:]).view(7, 4, 4), 20, 1e-6)
    assert torch.allclose(comb, first)


# post --------------------------------------------------------------------------------------------
def _post_case(t=3, d=40, seed=2):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(t, d, generator=g).bfloat16(), torch.randn(t, 4, d, generator=g).bfloat16())


@pytest.mark.parametrize("impl", ["reference", pytest.param("triton", marks=needs_triton)])
def test_post_orientation_source_i_to_destination_j(impl):
    x, h = _post_case()
    fn = registry.get_impl("mhc_post", impl).fn
    comb = torch.zeros(3, 4, 4)
    comb[:, 0, 2] = 1.0                      # comb[i=0][j=2]: stream 0 feeds stream 2
    comb[:, 3, 0] = 0.5
    post = torch.tensor([[0.0, 1.0, 0.0, 0.0]]).repeat(3, 1)
    out = fn(x=x, h=h, post=post, comb=comb)
    assert torch.equal(out[:, 2], h[:, 0])
    assert torch.equal(out[:, 0], (0.5 * h[:, 3].float()).bfloat16())
    assert torch.equal(out[:, 1], x)
    assert torch.equal(out[:, 3], torch.zeros_like(x))
    ident = fn(x=x, h=h, post=torch.zeros(3, 4), comb=torch.eye(4).repeat(3, 1, 1))
    assert torch.equal(ident, h)


# pre and head --------------------------------------------------------------------------------------
@pytest.mark.parametrize("impl", ["reference", pytest.param("triton", marks=needs_triton)])
def test_pre_with_zero_projection_mixes_by_sigmoid_of_base(impl):
    _, h = _post_case(t=2, d=64)
    base = torch.linspace(-2, 2, 24)
    x, post, comb = registry.get_impl("mhc_pre", impl).fn(
        h=h, fn=torch.zeros(24, 256), base=base, scale=torch.ones(3), iters=20, eps=1e-6, norm_eps=1e-6)
    pre = torch.sigmoid(base[:4].double()) + 1e-6
    want = (pre[None, :, None] * h.double()).sum(1)
    assert torch.allclose(x.double(), want, rtol=2 ** -7, atol=1e-6)
    assert torch.allclose(post, (2 * torch.sigmoid(base[4:8])).expand(2, 4), atol=1e-6)
    with compute_dtype(torch.float64):
        want_comb = M.sinkhorn(base[8:].double().view(1, 4, 4), 20, 1e-6).float()
    assert torch.allclose(comb, want_comb.expand(2, 4, 4), atol=1e-6)


@pytest.mark.parametrize("impl", ["reference", pytest.param("triton", marks=needs_triton)])
def test_pre_is_invariant_to_the_scale_of_h(impl):
    inp = inputs("mhc_pre", {"T": 3, "D": 64, "iters": 20})
    fn = registry.get_impl("mhc_pre", impl).fn
    x1, post1, comb1 = fn(**inp)
    x4, post4, comb4 = fn(**{**inp, "h": inp["h"] * 4})          # exact in bf16
    assert torch.allclose(post4, post1, rtol=1e-5, atol=1e-6) and torch.allclose(comb4, comb1, rtol=1e-5, atol=1e-6)
    assert torch.allclose(x4.float(), 4 * x1.float(), rtol=2 ** -7, atol=1e-3)
    assert not torch.allclose(comb1, torch.full_like(comb1, 0.25), atol=1e-2)   # a non-trivial comb


@pytest.mark.parametrize("impl", ["reference", pytest.param("triton", marks=needs_triton)])
def test_head_is_sigmoid_weighted_sum_without_sinkhorn(impl):
    inp = inputs("mhc_head", {"T": 2, "D": 64, "iters": 20})
    h = inp["h"]
    xf = h.double().flatten(1)
    m = (xf @ inp["fn"].double().T) * torch.rsqrt(xf.square().mean(-1, keepdim=True) + 1e-6)
    pre = torch.sigmoid(m * inp["scale"].double() + inp["base"].double()) + 1e-6
    want = (pre[:, :, None] * h.double()).sum(1)
    x = registry.get_impl("mhc_head", impl).fn(**inp)
    assert torch.allclose(x.double(), want, rtol=2 ** -7, atol=1e-3)


def test_post_pre_is_post_then_pre_on_the_stored_streams():
    inp = inputs("mhc_post_pre", {"T": 2, "D": 32, "iters": 5})
    h2, x, post, comb = M.mhc_post_pre(**inp)
    assert torch.equal(h2, M.mhc_post(inp["x"], inp["h"], inp["post"], inp["comb"]))
    pre_args = {k: inp[k] for k in ("fn", "base", "scale", "iters", "eps", "norm_eps")}
    for a, b in zip((x, post, comb), M.mhc_pre(h2, **pre_args)):
        assert torch.equal(a, b)


def test_post_pre_norm_is_post_pre_then_rms_norm():
    from kernelbench.reference.norm import rms_norm
    inp = inputs("mhc_post_pre_norm", {"T": 2, "D": 32, "iters": 5})
    h2, xn, post, comb = M.mhc_post_pre_norm(**inp)
    unfused = M.mhc_post_pre(**{k: v for k, v in inp.items() if k not in ("weight", "rms_eps")})
    for a, b in zip((h2, post, comb), (unfused[0], unfused[2], unfused[3])):
        assert torch.equal(a, b)
    assert torch.equal(xn, rms_norm(unfused[1], inp["weight"], inp["rms_eps"]))
    assert not torch.equal(xn, unfused[1])


def test_fp32_sublayer_output_and_its_addend_are_rounded_once():
    # a TP rank's fp32 partial sum (+ the bf16 shared expert) as x: summed in fp32, one bf16 rounding, then the post
    inp = inputs("mhc_post", {"T": 3, "D": 64, "iters": 2, "xin": "fp32_add"})
    assert inp["x"].dtype == torch.float32 and inp["x_add"].dtype == torch.bfloat16
    rounded = (inp["x"] + inp["x_add"].float()).to(torch.bfloat16)
    assert torch.equal(rounded, torch.add(inp["x"], inp["x_add"], out=torch.empty_like(inp["x_add"])))
    base = {k: v for k, v in inp.items() if k != "x_add"}
    assert torch.equal(M.mhc_post(**inp), M.mhc_post(**{**base, "x": rounded}))
    assert not torch.equal(M.mhc_post(**inp), M.mhc_post(**{**base, "x": inp["x"].to(torch.bfloat16)}))
    assert torch.equal(M.mhc_post(**base), M.mhc_post(**{**base, "x": inp["x"].to(torch.bfloat16)}))


# kernels vs reference ------------------------------------------------------------------------------
@needs_triton
@pytest.mark.parametrize("op", OPS)
def test_kernel_matches_reference(op):
    verify_drawn(op)


@needs_triton
@pytest.mark.parametrize("op", OPS)
def test_kernel_with_many_splits_and_two_token_blocks(op):
    # D = 768: 12 projection splits (not a power of two); T = 17 > BLOCK_T = 16: a partial token block
    verify(op, {"T": 17, "D": 768, "iters": 20}, "outliers", 3, "contiguous")


def _check_config(op, impl, cfg, params, seed=4):
    from kernelbench.harness.testing import assert_close
    spec = registry.get_op(op)
    inp = inputs(op, params, "normal", seed)
    with compute_dtype(torch.float64):
        ref = spec.reference(**inp)
    out = registry.get_impl(op, impl).fn(**inp, config=cfg)
    outs, refs = (out, ref) if isinstance(out, tuple) else ((out,), (ref,))
    for name, o, r in zip(spec.outputs, outs, refs):
        assert_close(o, r, spec.tolerance(params)[name], name)
    return out


@needs_triton
@pytest.mark.parametrize("op,split", [("mhc_pre", None), ("mhc_post_pre", None), ("mhc_post_pre_norm", True),
                                     ("mhc_post_pre_norm", False), ("mhc_head", None)])
def test_kernel_config_variants(op, split):
    # impl triton_v2 (mhc_head: triton): streams as a grid axis (NJ=1), a one-warp mix, and 96 partials summed in
    # 3 chunks of 32; the fused norm walks D = 768 in two column blocks of 512 (the second one partial)
    cfg = {"BLOCK_T": 16, "BLOCK_D": 32, "num_warps": 4, "NJ": 1, "BLOCK_MIX": 512, "mix_warps": 1}
    if split is not None:   # the norm by the token's last mix program (triton_v2) or the two-pass walk (triton_v1)
        cfg["SPLIT_NORM"] = split
    _check_config(op, "triton" if op == "mhc_head" else "triton_v2", cfg, {"T": 17, "D": 768, "iters": 20})


# impl triton_v3: (op, config) at T = 17, D = 768 (24 or 12 column splits; 17 tokens = a partial last token block)
_CONFIGS = [
    # one launch with the MMA projection: the last program of each 16-token block runs the tail for its
    # tokens; the tail walks the row in two column blocks of 512 (store x', read back, normalize)
    ("mhc_post_pre_norm", {"BLOCK_T": 16, "BLOCK_D": 32, "num_warps": 4, "SIMT": False, "ONE": True,
                           "BLOCK_FIN": 512}),
    # fp32-FMA projection, 4 tokens per program, 64 columns; the tail in a second one-warp launch, two blocks
    ("mhc_post_pre_norm", {"BLOCK_T": 4, "BLOCK_D": 64, "num_warps": 4, "SIMT": True, "ONE": False,
                           "tail_warps": 1, "BLOCK_FIN": 512}),
    ("mhc_post_pre", {"BLOCK_T": 2, "BLOCK_D": 32, "num_warps": 4, "SIMT": True, "ONE": True}),
    ("mhc_pre", {"BLOCK_T": 1, "BLOCK_D": 64, "num_warps": 4, "SIMT": True, "ONE": True, "BLOCK_FIN": 256}),
    ("mhc_head", {"BLOCK_T": 4, "BLOCK_D": 32, "num_warps": 4, "SIMT": True, "ONE": True}),
    ("mhc_head", {"BLOCK_T": 16, "BLOCK_D": 32, "num_warps": 4, "SIMT": False, "ONE": False, "tail_warps": 2}),
]


@needs_triton
@pytest.mark.parametrize("op,cfg", _CONFIGS, ids=[f"{op}-{i}" for i, (op, _) in enumerate(_CONFIGS)])
def test_v3_kernel_config_variants(op, cfg):
    _check_config(op, "triton_v3", cfg, {"T": 17, "D": 768, "iters": 20})


@needs_triton
def test_v3_one_launch_tickets_are_rearmed_and_the_result_is_deterministic():
    # the token block's last projection program takes the tail and puts its ticket back to zero: a second
    # call (same counters) must see zeros again and give bit-identical outputs
    from kernelbench.kernels import mhc as K
    cfg = {"BLOCK_T": 2, "BLOCK_D": 32, "num_warps": 4, "SIMT": True, "ONE": True}
    params = {"T": 5, "D": 96, "iters": 20}
    first = _check_config("mhc_post_pre_norm", "triton_v3", cfg, params, seed=7)
    assert int(K.token_counters(torch.device("cpu"), 3)[:3].abs().sum()) == 0
    second = _check_config("mhc_post_pre_norm", "triton_v3", cfg, params, seed=7)
    for a, b in zip(first, second):
        assert torch.equal(a, b)



# impl triton (`_mhc_proj4` + `_mhc_fin4`; mhc_head: triton_v4): (op, config) at T = 5, D = 96 (6 or 3 column
# splits, a partial last token block)
_CONFIGS4 = [
    # fp32-FMA projection, one token per program; the partials summed 4 splits at a time (a loop of 2 chunks);
    # the norm's row program (128 columns, 96 used) with one warp
    ("mhc_post_pre_norm", {"BLOCK_T": 1, "BLOCK_D": 16, "num_warps": 2, "SIMT": True, "BLOCK_MIX": 32,
                           "mix_warps": 1, "norm_warps": 1, "BLOCK_S": 4}),
    # MMA projection (16 tokens, 5 used), its operands read back from the stored h' (RELOAD) or not
    ("mhc_post_pre_norm", {"BLOCK_T": 16, "BLOCK_D": 32, "num_warps": 4, "SIMT": False, "BLOCK_MIX": 128,
                           "mix_warps": 4, "norm_warps": 4, "RELOAD": True}),
    ("mhc_post_pre", {"BLOCK_T": 16, "BLOCK_D": 32, "num_warps": 4, "SIMT": False, "BLOCK_MIX": 64,
                      "mix_warps": 2, "norm_warps": 4, "RELOAD": False}),
    # x in two 64-column programs (the second partial) beside the Sinkhorn program
    ("mhc_post_pre", {"BLOCK_T": 4, "BLOCK_D": 32, "num_warps": 4, "SIMT": True, "BLOCK_MIX": 64, "mix_warps": 2,
                      "norm_warps": 4}),
    ("mhc_pre", {"BLOCK_T": 2, "BLOCK_D": 32, "num_warps": 4, "SIMT": True, "BLOCK_MIX": 32, "mix_warps": 1,
                 "norm_warps": 4, "BLOCK_S": 2}),
    ("mhc_pre", {"BLOCK_T": 16, "BLOCK_D": 32, "num_warps": 4, "SIMT": False, "BLOCK_MIX": 64, "mix_warps": 2,
                 "norm_warps": 4}),
    ("mhc_head", {"BLOCK_T": 4, "BLOCK_D": 16, "num_warps": 2, "SIMT": True, "BLOCK_MIX": 64, "mix_warps": 2,
                  "norm_warps": 4}),
]


@needs_triton
@pytest.mark.parametrize("op,cfg", _CONFIGS4, ids=[f"{op}-{i}" for i, (op, _) in enumerate(_CONFIGS4)])
def test_v4_kernel_config_variants(op, cfg):
    _check_config(op, "triton_v4" if op == "mhc_head" else "triton", cfg, {"T": 5, "D": 96, "iters": 20})


@needs_triton
@pytest.mark.parametrize("seed", [0, 1])
def test_v4_norm_is_of_the_bf16_row_at_a_small_width(seed):
    # at D = 16 a norm from anything but the bf16 x' of the whole row (e.g. the fp32 x' through a Gram matrix of
    # the streams, tried first) moves several of the 16 outputs by an ulp and fails the op's rel_fro
    _check_config("mhc_post_pre_norm", "triton", None, {"T": 1, "D": 16, "iters": 1}, seed=seed)


@needs_triton
@pytest.mark.parametrize("op", ["mhc_pre", "mhc_post_pre", "mhc_post_pre_norm"])
def test_default_between_5_and_16_tokens_is_the_previous_pair(op):
    """Impl triton's default at 4 < T <= 16 is triton_v2's kernels and config (PAIR "mix", measured faster at
    T=16). The default is a config like any other: passed explicitly it runs what no config runs (session 22: a tune
    timed proj4 with the default's tiles as "the default" at T = 16, and its choice, applied by the lookup to the
    v2 kernels the step ran, made the C = 16 step 7% slower). A proj4 config there runs proj4; PAIR "mix" runs the
    v2 kernels at any T."""
    from kernelbench import tuned_configs
    from kernelbench.kernels import mhc as K
    spec, impl, v2 = registry.get_op(op), registry.get_impl(op, "triton"), registry.get_impl(op, "triton_v2")
    for t in (1, 6, 17):
        params = {"T": t, "D": 64, "iters": 3}
        inp = inputs(op, params)
        default = impl.default_config(params)
        assert default["PAIR"] == ("mix" if t == 6 else "proj4")
        assert (default in impl.configs(params)) or t != 6       # the space holds the previous pair's default
        for a, b in zip(impl.fn(**inp), impl.fn(**inp, config=default)):
            assert torch.equal(a, b)
    inp = inputs(op, {"T": 6, "D": 64, "iters": 3})
    mix = {k: v for k, v in impl.default_config({"T": 6, "D": 64}).items() if k != "PAIR"}
    for a, b in zip(impl.fn(**inp), v2.fn(**inp, config=mix)):
        assert torch.equal(a, b)
    proj4 = K.mhc4_default({"T": 17, "D": 64})                          # PAIR "proj4", MMA tiles
    pin = tuned_configs.Pin(op, proj4, (("T", frozenset({"6"})),))
    with tuned_configs.pins_applied([pin]):                             # a tuned proj4 entry at T = 6
        pinned = impl.fn(**inp)
    for a, b in zip(pinned, impl.fn(**inp, config=proj4)):
        assert torch.equal(a, b)
    assert any(not torch.equal(a, b) for a, b in zip(pinned, impl.fn(**inp)))       # not the v2 kernels' result
    one = inputs(op, {"T": 1, "D": 64, "iters": 3})
    for a, b in zip(impl.fn(**one, config={**mix, "PAIR": "mix"}), v2.fn(**one, config=mix)):
        assert torch.equal(a, b)
    with pytest.raises(ValueError, match="PAIR='v9'"):
        impl.fn(**inp, config={**proj4, "PAIR": "v9"})
    with pytest.raises(ValueError, match="runs 'proj4' only"):
        registry.get_impl("mhc_head", "triton_v4").fn(**inputs("mhc_head", {"T": 2, "D": 64}),
                                                       config={**proj4, "PAIR": "mix"})
    assert spec.name == op

POST_PAIRS = [(op, impl) for op in ("mhc_post", "mhc_post_pre", "mhc_post_pre_norm")
              for impl in registry.impls(op) if impl.startswith("triton")]


@needs_triton
@pytest.mark.parametrize("op,impl", POST_PAIRS)
def test_post_kernels_round_the_fp32_sum_like_the_decoder_did(op, impl):
    # bit for bit: x fp32 + x_add bf16 into the kernel == the bf16 sum (the decoder's former elementwise launch)
    inp = inputs(op, {"T": 2, "D": 64, "iters": 2, "xin": "fp32_add"}, "outliers", seed=3)
    fn = registry.get_impl(op, impl).fn
    fused = fn(**inp)
    unfused = fn(**{**{k: v for k, v in inp.items() if k != "x_add"},
                    "x": torch.add(inp["x"], inp["x_add"], out=torch.empty_like(inp["x_add"]))})
    for a, b in zip(*((fused, unfused) if isinstance(fused, tuple) else ((fused,), (unfused,)))):
        assert torch.equal(a, b)


# errors --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("impl", ["reference", pytest.param("triton", marks=needs_triton)])
def test_bad_input_is_a_clear_error(impl):
    inp = inputs("mhc_pre", {"T": 2, "D": 16, "iters": 2})
    fn = registry.get_impl("mhc_pre", impl).fn
    with pytest.raises(ValueError, match="fn"):
        fn(**{**inp, "fn": inp["fn"][:20]})
    with pytest.raises(ValueError, match=r"\[T, 4, D\]"):
        fn(**{**inp, "h": inp["h"][:, :3]})
    with pytest.raises(ValueError, match="iters"):
        fn(**{**inp, "iters": 0})
    post_in = inputs("mhc_post", {"T": 2, "D": 16, "iters": 2})
    post_fn = registry.get_impl("mhc_post", impl).fn
    with pytest.raises(ValueError, match="comb"):
        post_fn(**{**post_in, "comb": post_in["comb"][:, :3]})
    with pytest.raises(TypeError, match="x must be bfloat16 or float32"):
        post_fn(**{**post_in, "x": post_in["x"].half()})
    with pytest.raises(TypeError, match="x_add"):
        post_fn(**{**post_in, "x_add": post_in["x"].float()})
    with pytest.raises(ValueError, match="x_add"):
        post_fn(**{**post_in, "x_add": post_in["x"][:1]})


# sm_120 ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("all_configs", [False, pytest.param(True, marks=pytest.mark.slow)])
def test_sm120_compile_fits_without_spills_on_tensor_cores(all_configs):
    reps = inspector.inspect_impls(list(OPS), shape_set="flash-tp8", target="sm_120", batches=(64,),
                                   all_configs=all_configs)
    assert len(reps) >= len(OPS)
    for rep in reps:
        assert rep["problems"] == [], (rep["label"], rep["config"], rep["problems"])
        for k in rep["kernels"]:
            assert k["shared_bytes"] <= 101376 and not k["spills"], k
            mma = k["kernel"].endswith("_mhc_proj") or (k["kernel"].endswith(("_mhc_proj1", "_mhc_proj4"))
                                                       and not (rep["config"] or {}).get("SIMT"))
            if mma:   # the projection is on tensor cores (impl triton's SIMT form, for T <= 4, uses fp32 FMAs)
                assert any(i.startswith("HMMA") for i in k["sass_mma"]), k
