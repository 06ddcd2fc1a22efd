"""The indexer's key cache stored as FP4 (kernels/indexer.py pack_fp4_keys, impl triton_fp4keys of indexer_topk and
csa_indices): the keys every indexer cache of the model holds (Hadamard-rotated, then FP4-simulated in groups of 32 by
the indexer compressor) packed exactly into two e2m1 codes a byte and one UE8M0 exponent byte per 32 dims (68 bytes a
key instead of 256); the score launch making each key block bf16 again, so the outputs equal impl triton's bit for bit
at the same config; the fallback for a cache that is not FP4, bad inputs, sm_120."""
from __future__ import annotations

import pytest
import torch
import triton
import triton.language as tl

from kernelbench import registry
from kernelbench.kernels.common import INTERPRET
from kernelbench.reference.quant import E2M1_VALUES, fp4_simulate
from _kernel_check import fits_sm120
from _quant_moe_util import check_against_reference, poisoned_empty

registry.load_builtin()
from kernelbench.kernels import indexer as KI  # noqa: E402  (after the registry: the interpreter flag is set)


def _unpacked(codes, exps):
    """The packed form's values by torch: e2m1(code) x 2^(e - 127), NaN for exponent 255."""
    nib = torch.stack((codes & 15, codes >> 4), -1).flatten(-2).long()
    val = torch.tensor(E2M1_VALUES, dtype=torch.float64)[nib]
    scale = torch.ldexp(torch.ones(exps.shape, dtype=torch.float64), exps.long() - 127)
    scale = torch.where(exps == 255, float("nan"), scale)
    return val * scale.repeat_interleave(KI.KEY_GROUP, -1)


def _keys(b, n, gen, spread=1.0):
    x = torch.randn(b * n, KI.DI, generator=gen) * spread
    return fp4_simulate(x.bfloat16(), KI.KEY_GROUP).reshape(b, n, KI.DI)


def test_pack_is_exact_and_refuses_what_is_not_fp4():
    """Simulated keys (three magnitudes, an all-zero group, a group at the smallest scale 2^-126, a NaN row as the
    op's never-read rows) pack into codes and exponents equal to every value; a group whose codes stay under 4 takes
    a smaller scale, still exact. Keys that are not FP4, partly NaN groups, a scale past 2^113, a subnormal value
    (e2m1 0.5 x 2^-126), or a non-bf16 cache give None, and prepare leaves the inputs as they are."""
    gen = torch.Generator().manual_seed(5)
    k = _keys(2, 6, gen)
    k[0, 1] = _keys(1, 1, gen, 2.0 ** 40)[0, 0]
    k[0, 2] = _keys(1, 1, gen, 2.0 ** -40)[0, 0]
    k[1, 0, :32] = 0
    tiny = torch.tensor([0.0, 1.0, -6.0, 3.0] * 8) * 2.0 ** -126
    k[1, 1, 32:64] = tiny.bfloat16()                               # the smallest scale, 2^-126
    k[1, 2, :32] = k[1, 2, :32] * 0.25                             # exact; the group's codes now stay small...
    k[1, 5] = float("nan")
    codes, exps = KI.pack_fp4_keys(k)
    assert codes.dtype == torch.uint8 and codes.shape == (2, 6, 64) and exps.shape == (2, 6, 4)
    back = _unpacked(codes, exps)
    fin = ~torch.isnan(k.double())
    assert torch.equal(back[fin], k.double()[fin]) and bool(torch.isnan(back[~fin]).all())
    assert bool((exps[1, 5] == 255).all()) and exps[1, 1, 1] == 1    # never-read row; scale 2^-126
    assert int(exps[1, 2, 0]) < int(exps[1, 2, 1])                  # ...so its scale is 4x smaller
    assert KI.pack_fp4_keys(torch.randn(1, 4, 128, generator=gen).bfloat16()) is None
    part = k.clone()
    part[0, 0, 3] = float("nan")
    assert KI.pack_fp4_keys(part) is None
    assert KI.pack_fp4_keys(_keys(1, 2, gen, 2.0 ** 115)) is None  # scale 2^114: past KEY_EXP_MAX
    assert KI.pack_fp4_keys(k.float()) is None and KI.pack_fp4_keys(k[..., :64]) is None
    sub = k.clone()
    sub[1, 1, 32] = 2.0 ** -127                                    # e2m1 0.5 x 2^-126: a subnormal bf16 value
    assert float(sub[1, 1, 32]) == 2.0 ** -127 and KI.pack_fp4_keys(sub) is None
    plain = {"k_cache": torch.randn(1, 4, 128, generator=gen).bfloat16()}
    assert KI.prepare_fp4_keys(plain) is plain


@triton.jit
def _rows_kernel(kc_ptr, ke_ptr, out_ptr, n, BS: tl.constexpr, DI: tl.constexpr, GROUP: tl.constexpr,
                 MASKED: tl.constexpr):
    rows = tl.program_id(0) * BS + tl.arange(0, BS)
    keys = KI._fp4_key_rows(kc_ptr, ke_ptr, rows.to(tl.int64), rows < n, DI // 2, DI // GROUP, DI, GROUP, MASKED)
    tl.store(out_ptr + rows[:, None] * DI + tl.arange(0, DI)[None, :], keys, mask=(rows < n)[:, None])


@pytest.mark.parametrize("masked", [False, True])
def test_score_launch_decodes_every_code_and_scale_bit_for_bit(masked):
    """The kernel's decode (`_fp4_key_rows`) gives back the packed keys bit for bit: all 16 codes (-0 included)
    under exponents from 2 to KEY_EXP_MAX, all but 0.5 under exponent 1 (0.5 x 2^-126 is subnormal: refused by the
    pack), NaN under 255."""
    codes = torch.arange(256, dtype=torch.uint8).repeat(4)              # every byte: every (even, odd) code pair
    keys = torch.tensor(E2M1_VALUES)[torch.stack((codes & 15, codes >> 4), -1).flatten().long()]
    keys = keys.reshape(-1, 32)                                        # groups of 32 values
    exps = torch.tensor([1, 2, 64, 126, 127, 128, 200, KI.KEY_EXP_MAX])
    rows = []
    for e in exps.tolist():
        rows.append(torch.where((keys.abs() == 0.5) & (e == 1), 1.0, keys) * 2.0 ** (e - 127))
    want = torch.cat(rows).reshape(-1, KI.DI).bfloat16()
    assert bool(torch.isfinite(want.float()).all())
    want = torch.cat((want, torch.full((16, KI.DI), float("nan"), dtype=torch.bfloat16)))     # 144 rows: 9 blocks
    codes, exps = KI.pack_fp4_keys(want[None])
    assert int(exps.min()) == 1 and int(exps[exps != 255].max()) == KI.KEY_EXP_MAX
    n = want.shape[0]
    out = torch.full((n, KI.DI), 7.0, dtype=torch.bfloat16)
    _rows_kernel[(triton.cdiv(n, 16),)](codes[0], exps[0], out, n, BS=16, DI=KI.DI, GROUP=KI.KEY_GROUP,
                                       MASKED=masked)
    bits = lambda x: x.view(torch.int16)                               # noqa: E731
    assert torch.equal(bits(out[:-16]), bits(want[:-16]))            # -0.0 stays -0.0
    assert bool(torch.isnan(out[-16:].float()).all())


CASES = [
    {"T": 3, "Hi": 8, "topk": 16, "ctx": 300, "cap": 100, "ragged": True},
    {"T": 2, "Hi": 64, "topk": 24, "ctx": 700, "cap": 200, "ragged": False},
    {"T": 4, "Hi": 5, "topk": 8, "ctx": 40, "cap": 12, "ragged": True},
]


@pytest.mark.parametrize("op", ["indexer_topk", "csa_indices"])
@pytest.mark.parametrize("p", CASES)
@pytest.mark.parametrize("cfg", [None, {"BLOCK_S": 64, "num_warps": 4, "num_stages": 1, "waves": 64, "SCAN": 2048,
                                        "TOPK_WARPS": 8, "SEGMENTS": 4, "SEG_MIN": 4}])
def test_fp4_keys_are_bit_equal_to_the_bf16_keys(op, p, cfg, monkeypatch):
    """On the op's inputs (FP4-simulated keys, NaN past each sequence's keys), impl triton_fp4keys on the packed cache
    passes the reference's check on poisoned outputs and equals impl triton on the bf16 cache at the same config bit
    for bit: the default, and many score programs with the split top-k."""
    p = {**p, "W": 16} if op == "csa_indices" else p
    poisoned_empty(monkeypatch)
    inp, out, _ = check_against_reference(op, p, "normal", config=cfg, impl_name="triton_fp4keys")
    impl = registry.get_impl(op, "triton_fp4keys")
    run = impl.prepared(inp)
    assert run["k_cache"].dtype == torch.uint8 and run["k_exp"].dtype == torch.uint8
    same = cfg or impl.default_config(p)
    want = registry.get_impl(op, "triton").fn(**inp, config=same)
    assert all(torch.equal(a, b) for a, b in zip(out, want))


def test_fp4_scores_equal_the_bf16_scores():
    """The score launch alone: every score below each token's keys equal, the tokens' keys 2^30, 2^-30 and 1 in
    scale."""
    spec = registry.get_op("indexer_topk")
    p = CASES[1]
    inp = spec.make_inputs(p, torch.Generator().manual_seed(7), "cpu", "normal")
    k = inp["k_cache"]
    k[inp["seq_ids"][0]] *= 2.0 ** 30
    k[inp["seq_ids"][1]] *= 2.0 ** -30
    run = KI.prepare_fp4_keys(inp)
    cfg = KI.fp4keys_default(p)
    args = (inp["qi"], inp["w"])
    rest = (inp["seq_ids"], inp["positions"], inp["ratio"], inp["w_scale"], cfg, torch.device("cpu"))
    ours = KI.index_scores(*args, run["k_cache"], *rest, k_exp=run["k_exp"])
    base = KI.index_scores(*args, k, *rest)
    n = (inp["positions"] + 1) // inp["ratio"]
    for t in range(p["T"]):
        assert torch.equal(ours[t, :n[t]], base[t, :n[t]])
    assert bool(torch.isfinite(base[0, :n[0]]).all()) and bool((base[0, :n[0]] != 0).any())


def test_fp4_keys_bad_inputs():
    """The packed form's parts are checked by name (a wrong dtype or shape, parts on other devices), csa_indices'
    ROW False (the two ops) is refused; without k_exp the bf16 cache runs impl triton's path."""
    op = "csa_indices"
    p = {**CASES[0], "W": 16}
    inp = registry.get_op(op).make_inputs(p, torch.Generator().manual_seed(1), "cpu", "normal")
    impl = registry.get_impl(op, "triton_fp4keys")
    run = impl.prepared(inp)
    with pytest.raises(TypeError, match=r"FP4 key cache \(k_cache codes, k_exp\) must be uint8"):
        impl.fn(**{**run, "k_exp": run["k_exp"].int()})
    with pytest.raises(ValueError, match=r"k_exp must be \[B, Ncap, 4\]"):
        impl.fn(**{**run, "k_exp": run["k_exp"][:, :, :2].contiguous()})
    with pytest.raises(ValueError, match=r"k_cache \(codes\) must be \[B, Ncap, 64\]"):
        impl.fn(**{**run, "k_cache": run["k_cache"][:, :, :32].contiguous()})
    with pytest.raises(TypeError, match="must be uint8, got torch.bfloat16"):
        impl.fn(**{**run, "k_cache": inp["k_cache"]})
    with pytest.raises(ValueError, match="ROW False"):
        impl.fn(**run, config={**KI.fp4keys_default(p), "ROW": False})
    cfg = KI.fp4keys_default(p)
    want = registry.get_impl(op, "triton").fn(**inp, config=cfg)
    assert all(torch.equal(a, b) for a, b in zip(impl.fn(**inp, config=cfg), want))


def test_fp4_keys_space_fits_sm120():
    """The default and the first config of impl triton_fp4keys at the Flash TP8 64-token case compile for sm_120
    within its shared memory, without spills (128-key blocks at 4 warps do not: fp4keys_configs). All 26 configs of
    the space did at that case in session 55 (the inspector over the whole space, as `kernelbench inspect
    --all-configs` runs it; too slow for CI)."""
    spec = registry.get_op("indexer_topk")
    p = next(c for c in spec.shape_cases("flash-tp8") if c["T"] == 64)
    configs = registry.get_impl("indexer_topk", "triton_fp4keys").configs(p)
    assert not any(c["BLOCK_S"] == 128 and c["num_warps"] == 4 for c in configs)
    fits_sm120("indexer_topk", "triton_fp4keys", p, (None, configs[0]), "_index_scores")


@pytest.mark.gpu
@pytest.mark.skipif(INTERPRET or not torch.cuda.is_available(), reason="needs a CUDA GPU; runs on the device machine "
                    "(scripts/device_gpu_tests.sh rest)")
def test_gpu_fp4_keys_are_bit_equal_to_the_bf16_keys():
    """Compiled, at the Flash TP8 shapes (1, 16 and 64 tokens at context 512, 1 and 16 at 64K): impl triton_fp4keys of
    csa_indices on the packed cache equals impl triton on the bf16 cache at the same config, direct and replayed
    from a CUDA graph."""
    op = "csa_indices"
    spec = registry.get_op(op)
    impl = registry.get_impl(op, "triton_fp4keys")
    cases = [c for c in spec.shape_cases("flash-tp8-long") if c["cap"] * 4 == c["ctx"]
             and (c["ctx"] == 512 or (c["ctx"] == 65536 and c["T"] <= 16))]   # 64 x 64K keys: slow to draw on a CPU
    assert len(cases) == 5
    for p in cases:
        inp = spec.make_inputs(p, torch.Generator().manual_seed(p["T"]), "cuda", "normal")
        run = impl.prepared(inp)
        assert run["k_cache"].dtype == torch.uint8, p
        cfg = impl.default_config(p)
        want = registry.get_impl(op, "triton").fn(**inp, config=cfg)
        assert all(torch.equal(a, b) for a, b in zip(impl.fn(**run, config=cfg), want)), p
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            outs = impl.fn(**run, config=cfg)
        for _ in range(2):
            g.replay()
        torch.cuda.synchronize()
        assert all(torch.equal(a, b) for a, b in zip(outs, want)), p


def test_pack_op_writes_the_form_the_score_launch_reads():
    """fp4_pack_keys (the decoder's FP4 key cache write): impl triton equals the reference bit for bit (emitted, every
    code and exponent byte, the slots no token wrote left as they were), on staged rows as the indexer compressor
    writes them (then the packed slot gives the row back exactly) and on unsimulated rows (quantized by act_quant_fp4's
    rule); a csa_indices run on the packed cache equals one on the bf16 keys."""
    from kernelbench.reference.indexer import unpack_fp4_keys
    spec = registry.get_op("fp4_pack_keys")
    ref, tri = registry.get_impl("fp4_pack_keys", "reference"), registry.get_impl("fp4_pack_keys", "triton")
    p = {"T": 9, "ctx": 40, "cap": 12, "ragged": True}
    for values in ("normal", "unsimulated"):
        inp = spec.make_inputs(p, torch.Generator().manual_seed(4), "cpu", values)
        a = {k: (v.clone() if isinstance(v, torch.Tensor) else v) for k, v in inp.items()}
        b = {k: (v.clone() if isinstance(v, torch.Tensor) else v) for k, v in inp.items()}
        emitted = ref.fn(**a)
        assert torch.equal(tri.fn(**b), emitted) and 0 < int(emitted.sum()) < p["T"]
        assert torch.equal(a["codes"], b["codes"]) and torch.equal(a["exps"], b["exps"])
        seq, slot = inp["seq_ids"][emitted].long(), (inp["positions"][emitted] // 4).long()
        written = torch.zeros(inp["codes"].shape[:2], dtype=torch.bool)
        written[seq, slot] = True
        assert torch.equal(b["codes"][~written], inp["codes"][~written])
        back = unpack_fp4_keys(b["codes"][seq, slot], b["exps"][seq, slot])
        if values == "normal":
            assert torch.equal(back, inp["staged"][seq])
        else:
            assert not torch.equal(back, inp["staged"][seq])
            assert torch.equal(back, KI.unpack_fp4_keys(*KI.fp4_key_rows(inp["staged"][seq])))


def test_reference_reads_the_fp4_key_cache():
    """The reference indexer_topk / csa_indices take the packed cache too (k_exp): the same outputs as on the bf16
    keys (the decoder's reference backend runs the FP4 key cache through them)."""
    p = {**CASES[0], "W": 16}
    inp = registry.get_op("csa_indices").make_inputs(p, torch.Generator().manual_seed(6), "cpu", "normal")
    run = KI.prepare_fp4_keys(inp)
    for op in ("csa_indices", "indexer_topk"):
        ref = registry.get_op(op).reference
        args = inp if op == "csa_indices" else {k: v for k, v in inp.items() if k != "window"}
        packed = run if op == "csa_indices" else {k: v for k, v in run.items() if k != "window"}
        assert all(torch.equal(x, y) for x, y in zip(ref(**packed), ref(**args))), op
    with pytest.raises(TypeError, match="FP4 key cache .* must be uint8"):
        registry.get_op("csa_indices").reference(**{**run, "k_exp": run["k_exp"].int()})


def _decode_logits(model, seqs, decode_steps: int, dev):
    """Prefill each sequence but its last `decode_steps` tokens, then decode those teacher-forced together ->
    logits rows (prefill rows, then each step's)."""
    cache = model.new_cache(len(seqs), max(len(s) for s in seqs) + 1)
    rows = [model.prefill(s[:-decode_steps], b, cache)[0] for b, s in enumerate(seqs)]
    for i in range(decode_steps):
        pos = torch.tensor([len(s) - decode_steps + i for s in seqs], device=dev)
        ids = torch.stack([s[p] for s, p in zip(seqs, pos)])
        rows.append(model.decode(ids, pos, torch.arange(len(seqs), device=dev), cache)[0])
    return torch.cat(rows), cache


@pytest.mark.parametrize("backend,dev", [
    ("reference", "cpu"),
    pytest.param("triton", "cpu", marks=pytest.mark.slow),       # ~10 minutes in the interpreter
    pytest.param("triton", "cuda", marks=[pytest.mark.gpu, pytest.mark.skipif(
        INTERPRET or not torch.cuda.is_available(), reason="needs a CUDA GPU; runs on the device machine "
        "(scripts/device_gpu_tests.sh rest)")])])
def test_decoder_with_the_fp4_key_cache_equals_the_bf16_key_cache(backend, dev, tmp_path, monkeypatch):
    """KERNELBENCH_KEY_CACHE=fp4: the decoder holds the indexer keys packed (68 bytes a key; prefill packs its entries,
    each decode step's compressor_step emit writes them, key_codes / key_exps) and reads them with the fp4keys impls
    (triton) or the reference: the logits equal the bf16 key cache's bit for bit, through prefill and four decode
    steps with new keys emitted (positions past multiples of 4), two sequences at different lengths. The score
    launch's configs are pinned alike (the fp4keys impl's default takes 64-key blocks). The Triton decoder's glue on
    the CPU at CI cost: test_compressor_key_outputs_equal_the_separate_pack."""
    from kernelbench.config import TINY
    from kernelbench.decoder import checkpoint as ck
    from kernelbench.decoder.backend import Ops
    from kernelbench.decoder.model import Transformer
    path = ck.write_random(tmp_path / "tiny", TINY, seed=11)
    pin = '{"BLOCK_S": 64, "num_warps": 4, "num_stages": 1, "waves": 2, "SCAN": 2048, "TOPK_WARPS": 8}'
    monkeypatch.setenv("KERNELBENCH_PIN_CONFIG", f"csa_indices={pin};indexer_topk={pin}")
    gen = torch.Generator().manual_seed(3)
    seqs = [torch.randint(2, TINY.vocab_size, (n,), generator=gen).to(dev) for n in (22, 15)]
    out = {}
    for form in ("bf16", "fp4"):
        monkeypatch.setenv("KERNELBENCH_KEY_CACHE", form)
        m = Transformer.from_checkpoint(path, ops=Ops(backend), device=dev)
        out[form], cache = _decode_logits(m, seqs, 4, dev)
        csa = [lc for lc in cache.layers if lc.ratio == 4]
        assert csa and all((lc.idx_codes is not None) == (form == "fp4") for lc in csa)
        if form == "fp4":
            assert backend == "reference" or m.ops.resolve("csa_indices").name == "triton_fp4keys"
            # every key the run made was written (codes start at 0): prefill's and the decode steps' slots
            made = [(len(s)) // 4 for s in seqs]
            assert all(lc.idx_keys is None and all(bool(lc.idx_codes[b, :n].ne(0).any(-1).all())
                                                   for b, n in enumerate(made)) for lc in csa)
    assert torch.isfinite(out["bf16"]).all() and torch.equal(out["fp4"], out["bf16"])


def test_key_cache_setting_is_checked(monkeypatch):
    """A bad KERNELBENCH_KEY_CACHE is refused by name, and so is an FP4 key cache whose readers cannot take it."""
    from kernelbench.config import TINY
    from kernelbench.decoder.backend import Ops
    from kernelbench.decoder.cache import Cache, key_cache_form
    from kernelbench.decoder.model import fp4_key_readers
    monkeypatch.setenv("KERNELBENCH_KEY_CACHE", "fp8")
    with pytest.raises(ValueError, match="KERNELBENCH_KEY_CACHE must be one of bf16, fp4"):
        key_cache_form()
    with pytest.raises(ValueError, match="key_form must be one of"):
        Cache(TINY, 1, 8, key_form="int4")
    with pytest.raises(ValueError, match="csa_indices impl 'triton' does not read the FP4 key cache"):
        fp4_key_readers(Ops("triton", overrides={"indexer_topk": "triton_fp4keys", "csa_indices": "triton"}))
    ops = Ops("triton")
    assert ops.csa_indices is registry.get_impl("csa_indices", "triton").fn and not ops.accepts("csa_indices", "k_exp")
    fp4_key_readers(ops)                      # what was resolved before is forgotten (Ops.use)
    assert ops.csa_indices is registry.get_impl("csa_indices", "triton_fp4keys").fn
    assert ops.accepts("csa_indices", "k_exp")
    fp4_key_readers(Ops("reference"))         # the reference reads the form itself
    cache = Cache(TINY, 2, 40, key_form="fp4")
    lc = next(lc for lc in cache.layers if lc.ratio == 4)
    assert lc.idx_codes.shape == (2, 10, 64) and lc.idx_exp.shape == (2, 10, 4) and lc.idx_stage.shape == (2, 128)
    assert lc.idx_staging().stride(1) == 0 and lc.idx_staging().shape == (2, 10, 128)
    cache.fill_random(torch.Generator().manual_seed(0))
    assert 126 <= int(lc.idx_exp.min()) and int(lc.idx_exp.max()) <= 128


def test_compressor_writes_the_staging_row(monkeypatch):
    """The FP4 key cache's write as two ops (session 55's decoder; since session 56 the emit writes the form itself:
    test_compressor_key_outputs_equal_the_separate_pack): compressor_step (impl triton, the indexer compressor:
    Hadamard + FP4) writing through the stride-0 staging view, then fp4_pack_keys, leaves the codes and exponents
    that packing the bf16 cache compressor_step writes gives, and the same states."""
    from kernelbench.reference.indexer import fp4_key_rows
    spec = registry.get_op("compressor_step")
    comp = registry.get_impl("compressor_step", "triton")
    pack = registry.get_impl("fp4_pack_keys", "triton")
    p = {"T": 3, "D": 64, "d": 128, "R": 64, "ratio": 4, "rotate": True, "ctx": 40, "ragged": True}
    inp = spec.make_inputs(p, torch.Generator().manual_seed(8), "cpu", "normal")
    bf16 = {k: (v.clone() if isinstance(v, torch.Tensor) else v) for k, v in inp.items()}
    emitted = comp.fn(**bf16)
    assert 0 < int(emitted.sum()) < p["T"]
    b, ncap, _ = inp["cache"].shape
    stage = torch.zeros(b, 128, dtype=torch.bfloat16)
    codes = torch.zeros(b, ncap, 64, dtype=torch.uint8)
    exps = torch.zeros(b, ncap, 4, dtype=torch.uint8)
    staged = {**{k: (v.clone() if isinstance(v, torch.Tensor) else v) for k, v in inp.items()},
              "cache": stage[:, None].expand(b, ncap, 128)}
    assert torch.equal(comp.fn(**staged), emitted)
    pack.fn(staged=stage, positions=inp["positions"], seq_ids=inp["seq_ids"], ratio=4, codes=codes, exps=exps)
    for name in ("state_kv", "state_score"):
        assert torch.equal(staged[name], bf16[name])
    seq, slot = inp["seq_ids"][emitted].long(), (inp["positions"][emitted] // 4).long()
    want_codes, want_exps = fp4_key_rows(bf16["cache"][seq, slot])
    assert torch.equal(codes[seq, slot], want_codes) and torch.equal(exps[seq, slot], want_exps)
    assert int(exps[seq, slot].min()) > 100                              # written


KEY_OUTPUT_PATHS = [("reference", None), ("triton", {"PATH": "one", "EMIT_MAX_T": 8}),
                    ("triton", {"PATH": "one", "EMIT_MAX_T": 0}), ("triton", {"PATH": "split"}), ("triton_v1", None)]


def _fused_and_separate(comp, pack, inp, p, cfg, old_codes, old_exps) -> list[tuple]:
    """compressor_step (impl comp) through the staging view with key outputs, and without them followed by `pack`
    (fp4_pack_keys), each from the same inputs and key bytes -> [(emitted, staged rows, codes, exponents, state_kv,
    state_score) separate, (the same) fused]."""
    from kernelbench.kernels import compressor as KC
    b, ncap, _ = inp["cache"].shape
    config = {} if cfg is None else {"config": {**KC.step_default(p), **cfg}}
    runs = []
    for fused in (False, True):
        a = {k: (v.clone() if isinstance(v, torch.Tensor) else v) for k, v in inp.items()}
        stage = torch.zeros(b, 128, dtype=torch.bfloat16, device=old_codes.device)
        codes, exps = old_codes.clone(), old_exps.clone()
        a["cache"] = stage[:, None].expand(b, ncap, 128)
        keys = {"key_codes": codes, "key_exps": exps} if fused else {}
        emitted = comp.fn(**a, **keys, **config)
        if not fused:
            pack.fn(staged=stage, positions=inp["positions"], seq_ids=inp["seq_ids"], ratio=4, codes=codes,
                    exps=exps)
        runs.append((emitted, stage, codes, exps, a["state_kv"], a["state_score"]))
    return runs


@pytest.mark.parametrize("impl,cfg", KEY_OUTPUT_PATHS,
                         ids=["reference", "one-in-step", "one-emit-launch", "split-regs", "v1-memory"])
def test_compressor_key_outputs_equal_the_separate_pack(impl, cfg):
    """compressor_step with key_codes / key_exps (the FP4 key cache written by the emit that finishes each entry, no
    `fp4_pack_keys` launch) leaves every code and exponent byte, the staged rows, the states and `emitted` as the same
    step without them followed by fp4_pack_keys: every emit path (the one launch's finishers, its emit launch, the
    split path's register emit, triton_v1's memory emit) and the reference; the slots no token wrote keep their
    bytes."""
    spec = registry.get_op("compressor_step")
    p = {"T": 6, "D": 64, "d": 128, "R": 64, "ratio": 4, "rotate": True, "ctx": 40, "ragged": True}
    inp = spec.make_inputs(p, torch.Generator().manual_seed(9), "cpu", "normal")
    b, ncap, _ = inp["cache"].shape
    gen = torch.Generator().manual_seed(1)
    old_codes = torch.randint(0, 256, (b, ncap, 64), generator=gen, dtype=torch.uint8)
    old_exps = torch.randint(0, 256, (b, ncap, 4), generator=gen, dtype=torch.uint8)
    runs = _fused_and_separate(registry.get_impl("compressor_step", impl), registry.get_impl("fp4_pack_keys",
                               "reference"), inp, p, cfg, old_codes, old_exps)
    assert 1 < int(runs[0][0].sum()) < p["T"]
    assert not torch.equal(runs[0][2], old_codes)                     # the pack wrote
    for want, got in zip(*runs):
        assert torch.equal(got, want)


@pytest.mark.gpu
@pytest.mark.skipif(INTERPRET or not torch.cuda.is_available(), reason="needs a CUDA GPU; runs on the device machine "
                    "(scripts/device_gpu_tests.sh rest)")
def test_gpu_compressor_key_outputs_equal_the_separate_pack():
    """Compiled, at the Flash TP8 indexer compressor's cases (1, 16, 64 tokens): compressor_step with key outputs
    equals the same step followed by fp4_pack_keys in every byte, on the lookup's path and each other path."""
    spec = registry.get_op("compressor_step")
    comp = registry.get_impl("compressor_step", "triton")
    pack = registry.get_impl("fp4_pack_keys", "triton")
    for p in [c for c in spec.shape_cases("flash-tp8") if c["d"] == 128]:
        for cfg in (None, {"PATH": "one"}, {"PATH": "one", "EMIT_MAX_T": 0}, {"PATH": "split"}):
            inp = spec.make_inputs(p, torch.Generator().manual_seed(p["T"]), "cuda", "normal")
            b, ncap, _ = inp["cache"].shape
            zeros = torch.zeros(b, ncap, 68, dtype=torch.uint8, device="cuda")
            runs = _fused_and_separate(comp, pack, inp, p, cfg, zeros[..., :64], zeros[..., 64:])
            assert int(runs[0][0].sum()) > 0, p
            assert all(torch.equal(g, w) for w, g in zip(*runs)), (p["T"], cfg)


def test_compressor_key_outputs_bad_inputs():
    """key_codes / key_exps: both or neither, the indexer compressor's only (rotate), uint8 (TypeError), beside the
    cache (ValueError), every implementation."""
    spec = registry.get_op("compressor_step")
    p = {"T": 2, "D": 64, "d": 128, "R": 64, "ratio": 4, "rotate": True, "ctx": 40, "ragged": False}
    inp = spec.make_inputs(p, torch.Generator().manual_seed(2), "cpu", "normal")
    b, ncap, _ = inp["cache"].shape
    codes, exps = torch.zeros(b, ncap, 64, dtype=torch.uint8), torch.zeros(b, ncap, 4, dtype=torch.uint8)
    for impl in ("reference", "triton", "triton_v2"):
        fn = registry.get_impl("compressor_step", impl).fn
        with pytest.raises(ValueError, match="go together"):
            fn(**inp, key_codes=codes)
        with pytest.raises(ValueError, match="rotate"):
            fn(**{**inp, "rotate": False}, key_codes=codes, key_exps=exps)
        with pytest.raises(TypeError, match=r"compressor_step: the FP4 key cache \(key_codes codes, key_exps\) must"):
            fn(**inp, key_codes=codes.float(), key_exps=exps)
        with pytest.raises(ValueError, match="beside cache"):
            fn(**inp, key_codes=codes[:1], key_exps=exps[:1])


def test_decode_bench_counts_the_packed_keys_the_compressor_writes():
    """decode-bench's bytes of a compressor_step call with key outputs: the call's own bytes plus 68 per emitted key,
    not the whole FP4 key cache."""
    from kernelbench.decoder import decode_bench as db
    spec = registry.get_op("compressor_step")
    p = {"T": 6, "D": 64, "d": 128, "R": 64, "ratio": 4, "rotate": True, "ctx": 40, "ragged": True}
    inp = spec.make_inputs(p, torch.Generator().manual_seed(9), "cpu", "normal")
    b, ncap, _ = inp["cache"].shape
    keys = {"key_codes": torch.zeros(b, ncap, 64, dtype=torch.uint8),
            "key_exps": torch.zeros(b, ncap, 4, dtype=torch.uint8)}
    out = torch.zeros(6, dtype=torch.bool)
    emitted = int(((inp["positions"] + 1) % 4 == 0).sum())
    assert emitted > 1
    plain = db.call_bytes("compressor_step", inp, out)
    assert db.call_bytes("compressor_step", {**inp, **keys}, out) == plain + 68 * emitted


def test_compressor_key_outputs_fit_sm120():
    """The emit kernels that write the FP4 key form (KEY_FP4) compile for sm_120 at the Flash TP8 indexer compressor's
    cases (1, 16, 64 tokens) on each path a shipped config takes (the lookup's choice; the one launch, its finishers
    up to EMIT_MAX_T 4 tokens, else its emit launch; the split path's register emit): within its shared memory,
    without spills, at least one program an SM. (The one launch's finishers at 64 tokens, EMIT_MAX_T 64, no shipped
    config, spill 12 B with the key form: session 56.)"""
    import os
    import pathlib
    import subprocess
    import sys
    if not INTERPRET:
        _check_key_output_builds()
        return
    # the compiler needs real JITFunctions: the check in a process without the interpreter (as the inspector does)
    env = {**os.environ, "TRITON_INTERPRET": "0"}
    code = "import test_fp4_keys as t; t._check_key_output_builds()"
    done = subprocess.run([sys.executable, "-c", code], cwd=pathlib.Path(__file__).parent, env=env,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]


def _check_key_output_builds():
    from kernelbench.harness import inspector
    from kernelbench.harness.devices import SM_LIMITS
    from kernelbench.kernels import compressor as KC
    spec = registry.get_op("compressor_step")
    comp = registry.get_impl("compressor_step", "triton").fn
    seen = set()
    for p in [c for c in spec.shape_cases("flash-tp8") if c["d"] == 128]:
        for cfg in (None, {"PATH": "one"}, {"PATH": "one", "EMIT_MAX_T": 0}, {"PATH": "split"}):
            inp = spec.make_inputs(p, torch.Generator().manual_seed(0), "cpu", "normal")
            b, ncap, _ = inp["cache"].shape
            with inspector.capture() as launches:
                comp(**inp, key_codes=torch.zeros(b, ncap, 64, dtype=torch.uint8),
                     key_exps=torch.zeros(b, ncap, 4, dtype=torch.uint8),
                     config=None if cfg is None else {**KC.step_default(p), **cfg})
            emits = [l for l in launches if l.kwargs.get("KEY_FP4")]
            assert emits, (p["T"], cfg)
            for launch in emits:
                key = (launch.name, tuple(sorted((k, v) for k, v in launch.kwargs.items()
                                                 if isinstance(v, (bool, int)))))
                if key in seen:
                    continue
                seen.add(key)
                rep = inspector.compile_launch(launch, 120)
                assert not rep.error and rep.shared_bytes <= 101376 and not rep.spill_bytes, (launch.name, rep.error)
                assert SM_LIMITS[120].programs(rep.num_warps, rep.registers, rep.shared_bytes) >= 1, rep
