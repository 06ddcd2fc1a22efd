"""The KV compressor: the pooled entry equals an explicit per-channel softmax over the right rows
(overlap for r = 4 with a -inf/0 previous block at the start, plain blocks for r >= 8), prefill equals
token-by-token steps (entries and state), ragged batches step independently, only slot p // r is
written, and bad inputs fail clearly."""
from __future__ import annotations

import pytest
import torch
from hypothesis import given

from kernelbench import registry
from kernelbench.config import FLASH
from kernelbench.kernels import compressor as KC
from kernelbench.reference.compressor import compressor_prefill, compressor_step, init_state
from kernelbench.reference.hadamard import hadamard
from kernelbench.reference.norm import rms_norm
from kernelbench.reference.quant import fp4_simulate, fp8_simulate
from kernelbench.reference.rope import rope, rope_freqs
from kernelbench.harness.testing import assert_close

registry.load_builtin()
FREQS = rope_freqs(FLASH, compressed=True)


def _weights(gen, ratio, d=128, dim=64):
    c = 2 if ratio == 4 else 1
    return dict(wkv=(torch.randn(c * d, dim, generator=gen) * dim ** -0.5).bfloat16(),
                wgate=(torch.randn(c * d, dim, generator=gen) * dim ** -0.5).bfloat16(),
                ape=torch.randn(ratio, c * d, generator=gen) * 0.5,
                norm_weight=(1 + 0.2 * torch.randn(d, generator=gen)).bfloat16(), eps=1e-6, freqs=FREQS)


def _explicit_entry(x, w, ratio, block, d, rotate):
    """fp64, one channel at a time, rows chosen by token index: the SPEC's pooling then finalize."""
    kv = x.double() @ w["wkv"].double().t()
    sc = x.double() @ w["wgate"].double().t() + w["ape"].double()[torch.arange(x.shape[0]) % ratio]
    cur = list(range(block * ratio, (block + 1) * ratio))
    e = torch.empty(d, dtype=torch.float64)
    for ch in range(d):
        if ratio == 4:
            rows_k = [kv[i, d + ch] for i in cur]
            rows_s = [sc[i, d + ch] for i in cur]
            if block > 0:
                prev = [i - ratio for i in cur]
                rows_k += [kv[i, ch] for i in prev]
                rows_s += [sc[i, ch] for i in prev]
        else:
            rows_k = [kv[i, ch] for i in cur]
            rows_s = [sc[i, ch] for i in cur]
        s = torch.stack(rows_s)
        p = torch.exp(s - s.max())
        e[ch] = (p * torch.stack(rows_k)).sum() / p.sum()
    y = rms_norm(e.to(torch.bfloat16)[None], w["norm_weight"], w["eps"])
    y = torch.cat([y[:, :-64], rope(y[:, -64:], torch.tensor([block * ratio]), FREQS)], dim=1)
    if rotate:
        return fp4_simulate(hadamard(y), 32)[0]
    return torch.cat([fp8_simulate(y[:, :-64].contiguous(), 64), y[:, -64:]], dim=1)[0]


@pytest.mark.parametrize("ratio,rotate", [(4, False), (4, True), (8, False)])
def test_entries_equal_explicit_pooling(gen, ratio, rotate):
    w = _weights(gen, ratio)
    x = torch.randn(3 * ratio + 1, 64, generator=gen).bfloat16()
    entries, _, _ = compressor_prefill(x, **w, ratio=ratio, rotate=rotate)
    assert entries.shape == (3, 128)
    tol = registry.get_op("compressor_step").tolerance({"rotate": rotate})["cache"]
    for b in range(3):
        assert_close(entries[b], _explicit_entry(x, w, ratio, b, 128, rotate), tol, f"entry {b}")


def _step_all(x, w, ratio, rotate, seq=1, b=3, ncap=12):
    sk, ss = init_state(b, ratio, 128)
    cache = torch.full((b, ncap, 128), 7.0, dtype=torch.bfloat16)
    flags = []
    for p in range(x.shape[0]):
        flags.append(bool(compressor_step(x[p:p + 1], **w, positions=torch.tensor([p]), seq_ids=torch.tensor([seq]),
                                          state_kv=sk, state_score=ss, cache=cache, ratio=ratio, rotate=rotate)[0]))
    return cache, sk, ss, flags


@pytest.mark.parametrize("ratio,rotate,length", [(4, False, 23), (4, True, 16), (8, False, 21), (12, False, 5)])
def test_prefill_equals_steps(gen, ratio, rotate, length):
    w = _weights(gen, ratio)
    x = torch.randn(length, 64, generator=gen).bfloat16()
    entries, pk, ps = compressor_prefill(x, **w, ratio=ratio, rotate=rotate)
    cache, sk, ss, flags = _step_all(x, w, ratio, rotate)
    n = length // ratio
    assert flags == [(p + 1) % ratio == 0 for p in range(length)]
    assert torch.equal(cache[1, :n], entries)
    assert (cache[1, n:] == 7.0).all() and (cache[[0, 2]] == 7.0).all()    # nothing else written
    tol = registry.get_op("compressor_step").tolerance({"rotate": rotate})["state_kv"]
    assert_close(sk[1], pk, tol, "state_kv")
    assert_close(ss[1], ps, tol, "state_score")
    assert torch.equal(torch.isinf(ss[1]), torch.isinf(ps))


def test_prefix_then_steps_equals_steps(gen):
    """A prefill of 10 tokens followed by steps gives the entries of stepping from the start."""
    w = _weights(gen, 4)
    x = torch.randn(22, 64, generator=gen).bfloat16()
    full, _, _, _ = _step_all(x, w, 4, False)
    entries, pk, ps = compressor_prefill(x[:10], **w, ratio=4, rotate=False)
    sk, ss = init_state(3, 4, 128)
    sk[1], ss[1] = pk, ps
    cache = torch.full((3, 12, 128), 7.0, dtype=torch.bfloat16)
    cache[1, :2] = entries
    for p in range(10, 22):
        compressor_step(x[p:p + 1], **w, positions=torch.tensor([p]), seq_ids=torch.tensor([1]), state_kv=sk,
                        state_score=ss, cache=cache, ratio=4, rotate=False)
    assert_close(cache[1, :5], full[1, :5], registry.get_op("compressor_step").tolerance({"rotate": False})["cache"])


def test_ragged_batch_steps_like_single_sequences(gen):
    """Two sequences at different positions stepped together equal each stepped alone."""
    w = _weights(gen, 4)
    xa, xb = torch.randn(13, 64, generator=gen).bfloat16(), torch.randn(6, 64, generator=gen).bfloat16()
    ca, _, _, _ = _step_all(xa, w, 4, True, seq=0)
    cb, _, _, _ = _step_all(xb, w, 4, True, seq=2)
    sk, ss = init_state(3, 4, 128)
    cache = torch.full((3, 12, 128), 7.0, dtype=torch.bfloat16)
    for i in range(13):   # a joins late: b runs positions 0..5 alongside a's 7..12
        rows, pos, seq = [xa[i]], [i], [0]
        if i >= 7:
            rows.append(xb[i - 7]), pos.append(i - 7), seq.append(2)
        compressor_step(torch.stack(rows), **w, positions=torch.tensor(pos), seq_ids=torch.tensor(seq), state_kv=sk,
                        state_score=ss, cache=cache, ratio=4, rotate=True)
    assert torch.equal(cache[0], ca[0]) and torch.equal(cache[2], cb[2]) and (cache[1] == 7.0).all()


@given(registry.get_op("compressor_step").strategy())
def test_step_spec_inputs_reference_is_consistent(p):
    """On the spec's inputs (random realistic state), fp32 and fp64 reference agree within the tolerance:
    the tolerance is achievable and make_inputs is valid."""
    from kernelbench.reference.precision import compute_dtype
    spec = registry.get_op("compressor_step")
    gen = torch.Generator().manual_seed(5)
    inp = spec.make_inputs(p, gen, "cpu", "normal")
    a = {k: (v.clone() if isinstance(v, torch.Tensor) else v) for k, v in inp.items()}
    b = {k: (v.clone() if isinstance(v, torch.Tensor) else v) for k, v in inp.items()}
    ea = compressor_step(**a)
    with compute_dtype(torch.float64):
        eb = compressor_step(**b)
    tol = spec.tolerance(p)
    assert torch.equal(ea, eb)
    for k in ("state_kv", "state_score", "cache"):
        assert_close(a[k], b[k], tol[k], k)


def test_bad_inputs(gen):
    w = _weights(gen, 4)
    x = torch.randn(2, 64, generator=gen).bfloat16()
    sk, ss = init_state(3, 4, 128)
    cache = torch.zeros(3, 4, 128, dtype=torch.bfloat16)
    kw = dict(positions=torch.tensor([1, 2]), seq_ids=torch.tensor([0, 1]), state_kv=sk, state_score=ss, cache=cache)
    with pytest.raises(ValueError, match="ratio"):
        compressor_step(x, **w, **kw, ratio=6, rotate=False)
    with pytest.raises(ValueError, match="ape"):
        compressor_step(x, **{**w, "ape": w["ape"][:2]}, **kw, ratio=4, rotate=False)
    with pytest.raises(ValueError, match="states"):
        compressor_step(x, **w, **{**kw, "state_kv": sk[:, :4]}, ratio=4, rotate=False)
    with pytest.raises(ValueError, match="capacity"):
        compressor_step(x, **w, **{**kw, "positions": torch.tensor([1, 19])}, ratio=4, rotate=False)
    with pytest.raises(ValueError, match="duplicates"):
        compressor_step(x, **w, **{**kw, "seq_ids": torch.tensor([1, 1])}, ratio=4, rotate=False)


# Triton kernel ------------------------------------------------------------------------------------
STEP = registry.get_op("compressor_step")


@given(STEP.strategy())
def test_kernel_matches_reference_hypothesis(p):
    gen = torch.Generator().manual_seed(9)
    inp = STEP.make_inputs(p, gen, "cpu", "normal")
    ref = {k: (v.clone() if isinstance(v, torch.Tensor) else v) for k, v in inp.items()}
    from kernelbench.reference.precision import compute_dtype
    with compute_dtype(torch.float64):
        e_ref = compressor_step(**ref)
    e_out = KC.compressor_step(**inp)
    tol = STEP.tolerance(p)
    assert torch.equal(e_out, e_ref)
    for k in ("state_kv", "state_score", "cache"):
        assert_close(inp[k], ref[k], tol[k], k)


@pytest.mark.parametrize("ratio,rotate,length", [(4, False, 13), (4, True, 9), (8, False, 17)])
def test_kernel_steps_equal_prefill(gen, ratio, rotate, length):
    """Token-by-token kernel steps from an empty state give the prefill's entries and state."""
    w = _weights(gen, ratio)
    x = torch.randn(length, 64, generator=gen).bfloat16()
    entries, pk, ps = compressor_prefill(x, **w, ratio=ratio, rotate=rotate)
    sk, ss = init_state(2, ratio, 128)
    cache = torch.full((2, 4, 128), 7.0, dtype=torch.bfloat16)
    for p in range(length):
        KC.compressor_step(x[p:p + 1], **w, positions=torch.tensor([p]), seq_ids=torch.tensor([1]), state_kv=sk,
                           state_score=ss, cache=cache, ratio=ratio, rotate=rotate)
    n = length // ratio
    tol = STEP.tolerance({"rotate": rotate})
    assert_close(cache[1, :n], entries, tol["cache"], "entries")
    assert (cache[1, n:] == 7.0).all() and (cache[0] == 7.0).all()
    assert_close(sk[1], pk, tol["state_kv"], "state_kv")
    assert_close(ss[1], ps, tol["state_score"], "state_score")


@pytest.mark.parametrize("split", [2, 3])
def test_kernel_split_d_matches_unsplit(gen, split):
    """D split over programs (fp32 partials, then the fixed-order reduce launch) gives the state and cache of the
    unsplit projection up to fp32 summation order, and the same emitted flags; split 3 leaves a short last chunk."""
    ratio = 4
    w = _weights(gen, ratio, dim=160)
    x = torch.randn(3, 160, generator=gen).bfloat16()
    runs = []
    for cfg in ({"SPLIT": 1}, {"SPLIT": split}):
        sk, ss = init_state(4, ratio, 128)
        sk.normal_(generator=torch.Generator().manual_seed(1))
        ss.normal_(generator=torch.Generator().manual_seed(2))
        cache = torch.zeros(4, 4, 128, dtype=torch.bfloat16)
        em = KC.compressor_step(x, **w, positions=torch.tensor([3, 6, 11]), seq_ids=torch.tensor([2, 0, 1]),
                                state_kv=sk, state_score=ss, cache=cache, ratio=ratio, rotate=False,
                                config={**KC.compressor_default({}), "BLOCK_K": 32, **cfg})
        runs.append((em, sk, ss, cache))
    assert runs[0][0].tolist() == [True, False, True] and torch.equal(runs[0][0], runs[1][0])
    for a, b in zip(runs[0][1:], runs[1][1:]):
        torch.testing.assert_close(a.float(), b.float(), rtol=2 ** -7, atol=1e-5)
    assert KC.split_plan(160, 1, {"BLOCK_K": 32, "SPLIT": split}, 4) == (split, 64 if split == 3 else 96)
    assert KC.split_plan(4096, 16, {"BLOCK_K": 128, "SPLIT": 0, "waves": 2}, 132) == (16, 256)


@pytest.mark.parametrize("ratio,rotate,split,bn,emit_max_t", [
    (4, False, 2, 32, 99), (4, True, 2, 64, 0),      # ~30 s each in the interpreter; the other two paths are opt-in
    pytest.param(4, True, 2, 64, 99, marks=pytest.mark.slow), pytest.param(8, False, 1, 64, 99, marks=pytest.mark.slow)])
def test_one_launch_equals_three(gen, ratio, rotate, split, bn, emit_max_t):
    """The one-launch kernel (D-split ticket, overlap pair ticket, channel-block pooling, row-block finish ticket;
    emit_max_t 0: the emit as a second launch, per-token ticket) against the three-launch version (triton_v2): 18
    tokens in 2 row blocks, about half of them emitting, some at the first block (-inf previous rows); run twice on
    the same state copies (the kernel resets its tickets)."""
    w = _weights(gen, ratio)
    t, b = 18, 19
    x = torch.randn(t, 64, generator=gen).bfloat16()
    seq = torch.randperm(b, generator=gen)[:t]
    pos = torch.randint(0, 6, (t,), generator=gen) * ratio + torch.where(torch.rand(t, generator=gen) < 0.5, ratio - 1,
                                                                          torch.randint(0, ratio, (t,), generator=gen))
    cfg = {**KC.step_default({}), "BLOCK_K": 32, "SPLIT": split, "BLOCK_N": bn, "BLOCK_M": 16,
           "EMIT_MAX_T": emit_max_t}
    c = 2 if ratio == 4 else 1
    sk0, ss0 = init_state(b, ratio, 128)
    sk0.normal_(generator=gen)
    ss0.normal_(generator=gen)
    for i in range(t):
        if c == 2 and int(pos[i]) < ratio:
            sk0[seq[i], :ratio], ss0[seq[i], :ratio] = 0.0, float("-inf")
    cache0 = torch.randn(b, 8, 128, generator=gen).bfloat16()
    kw = dict(positions=pos, seq_ids=seq, ratio=ratio, rotate=rotate)
    ref = [sk0.clone(), ss0.clone(), cache0.clone()]
    em_ref = KC.compressor_step_v2(x, **w, **kw, state_kv=ref[0], state_score=ref[1], cache=ref[2],
                                   config={**cfg, "ROWS": 16})
    assert em_ref.tolist() == [(int(p) + 1) % ratio == 0 for p in pos] and 3 < int(em_ref.sum()) < 16
    tol = STEP.tolerance({"rotate": rotate})
    for _ in range(2):
        out = [sk0.clone(), ss0.clone(), cache0.clone()]
        em = KC.compressor_step(x, **w, **kw, state_kv=out[0], state_score=out[1], cache=out[2], config=cfg)
        assert torch.equal(em, em_ref)
        for name, a, r in zip(("state_kv", "state_score", "cache"), out, ref):
            assert_close(a, r, tol[name], name)
        assert (out[2] != ref[2]).float().mean() < 0.01


def test_kernel_bad_inputs(gen):
    w = _weights(gen, 4)
    x = torch.randn(2, 64, generator=gen).bfloat16()
    sk, ss = init_state(3, 4, 128)
    cache = torch.zeros(3, 4, 128, dtype=torch.bfloat16)
    kw = dict(positions=torch.tensor([1, 2]), seq_ids=torch.tensor([0, 1]), state_kv=sk, state_score=ss, cache=cache)
    with pytest.raises(ValueError, match="ratio"):
        KC.compressor_step(x, **w, **kw, ratio=6, rotate=False)
    with pytest.raises(ValueError, match="states"):
        KC.compressor_step(x, **w, **{**kw, "state_kv": sk.double()}, ratio=4, rotate=False)
    with pytest.raises(ValueError, match="cache"):
        KC.compressor_step(x, **w, **{**kw, "cache": cache.float()}, ratio=4, rotate=False)


PROJECT_SIG = {"x_ptr": "*bf16", "wkv_ptr": "*bf16", "wg_ptr": "*bf16", "ape_ptr": "*fp32", "pos_ptr": "*i64",
               "seq_ptr": "*i64", "sk_ptr": "*fp32", "ss_ptr": "*fp32", "ws_ptr": "*fp32", "T": "i32", "D": "i32",
               "N": "i32", "RATIO": "i32", "OFF": "i32", "s_sb": "i32", "s_sr": "i32", "KCHUNK": "i32",
               "BLOCK_M": "constexpr", "BLOCK_N": "constexpr", "BLOCK_K": "constexpr", "SPLIT": "constexpr",
               "DOT_UPCAST": "constexpr"}
REDUCE_SIG = {"ws_ptr": "*fp32", "ape_ptr": "*fp32", "pos_ptr": "*i64", "seq_ptr": "*i64", "sk_ptr": "*fp32",
              "ss_ptr": "*fp32", "T": "i32", "N": "i32", "RATIO": "i32", "OFF": "i32", "s_sb": "i32", "s_sr": "i32",
              "SPLIT": "constexpr", "SPLIT_P2": "constexpr", "BLOCK_R": "constexpr"}
EMIT_SIG = {"sk_ptr": "*fp32", "ss_ptr": "*fp32", "pos_ptr": "*i64", "seq_ptr": "*i64", "nw_ptr": "*bf16",
            "f_ptr": "*fp32", "cache_ptr": "*bf16", "em_ptr": "*u8", "eps": "fp32", "RATIO": "i32", "s_sb": "i32", "s_sr": "i32",
            "s_cb": "i32", "s_cn": "i32", "DD": "constexpr", "C": "constexpr", "R": "constexpr", "ROWS": "constexpr",
            "ROTATE": "constexpr", "NG_P2": "constexpr", "RNE_FIX": "constexpr", "REG": "constexpr"}

STEP_SIG = {"x_ptr": "*bf16", "wkv_ptr": "*bf16", "wg_ptr": "*bf16", "ape_ptr": "*fp32", "pos_ptr": "*i64",
            "seq_ptr": "*i64", "sk_ptr": "*fp32", "ss_ptr": "*fp32", "ws_ptr": "*fp32", "cnt_ptr": "*i32",
            "nw_ptr": "*bf16", "f_ptr": "*fp32", "cache_ptr": "*bf16", "em_ptr": "*u8", "T": "i32", "D": "i32", "N": "i32",
            "RATIO": "i32", "OFF": "i32", "s_sb": "i32", "s_sr": "i32", "s_cb": "i32", "s_cn": "i32", "KCHUNK": "i32",
            "eps": "fp32", "DD": "constexpr", "C": "constexpr", "R": "constexpr", "BLOCK_M": "constexpr",
            "BLOCK_N": "constexpr", "BLOCK_K": "constexpr", "SPLIT": "constexpr", "ROWS": "constexpr",
            "RB": "constexpr", "ROTATE": "constexpr", "DOT_UPCAST": "constexpr", "RNE_FIX": "constexpr"}


# Configs of this space unfit for sm_120 as compiled here (register spills, ptxas -v, or shared memory past the
# limit; session 31, when this check first counted spills, which it had read as cuobjdump's LOCAL, always 0 for them,
# and first compiled with a launch's alignment: `compile_sm120`). The tuner's sm_120 check records such configs
# invalid_spill / invalid_smem. Here: 8-56 B of spills in one projection tile and three of the four tile plans of
# the one-launch step below; the inspector's captures of the step's default at the Flash TP8 shapes (ci/baseline,
# 188 SMs' split counts) do not spill. `stale_unfit` fails the test when one fits again: drop it here.
SM120_KNOWN_UNFIT = frozenset({
    ('_comp_project', (('BLOCK_K', 64), ('BLOCK_M', 32), ('BLOCK_N', 64), ('SPLIT', 16)),
     4, 3),   # 8 B of spills
    ('_comp_step', (('BLOCK_K', 128), ('BLOCK_M', 16), ('BLOCK_N', 64), ('C', 2), ('DD', 512), ('R', 64),
                    ('RB', 4), ('ROTATE', False), ('ROWS', 8), ('SPLIT', 16)),
     4, 3),   # 16 B of spills
    ('_comp_step', (('BLOCK_K', 128), ('BLOCK_M', 32), ('BLOCK_N', 64), ('C', 1), ('DD', 512), ('R', 64),
                    ('RB', 4), ('ROTATE', False), ('ROWS', 32), ('SPLIT', 4)),
     4, 3),   # 56 B of spills
    ('_comp_step', (('BLOCK_K', 128), ('BLOCK_M', 16), ('BLOCK_N', 32), ('C', 1), ('DD', 512), ('R', 64),
                    ('RB', 4), ('ROTATE', False), ('ROWS', 32), ('SPLIT', 16)),
     4, 3),   # 36 B of spills
})


# Opt-in (KB_SLOW=1): compiling every shipped config from a cold Triton cache costs about 40 s of CI CPU. Still covered
# in the default run: tests/test_sm120.py (every implementation's default config at every Flash TP8 shape, sm_120
# limits and tensor-core instructions) and the tuned entries' own sm_120 check at export (`kernelbench tune`);
# every config of the space: `kernelbench inspect compressor_step --target sm_120 --all-configs`.
@pytest.mark.slow
def test_shipped_configs_fit_sm120():
    from test_attention import compile_sm120, sm120_problems, stale_unfit
    cfgs = KC.compressor_configs({}) + [KC.compressor_default({})]
    jobs = [{"module": "kernelbench.kernels.compressor", "kernel": "_comp_project", "signature": PROJECT_SIG,
             "constexprs": {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "SPLIT": sp, "DOT_UPCAST": False},
             "num_warps": w, "num_stages": s}
            for bm in (16, 32) for sp in (1, 16)
            for bn, bk, w, s in sorted({(c["BLOCK_N"], c["BLOCK_K"], c["num_warps"], c["num_stages"]) for c in cfgs})]
    jobs += [{"module": "kernelbench.kernels.compressor", "kernel": "_comp_reduce", "signature": REDUCE_SIG,
              "constexprs": {"SPLIT": sp, "SPLIT_P2": sp2, "BLOCK_R": max(32, 4096 // sp2)}, "num_warps": 4,
              "num_stages": 1} for sp, sp2 in ((2, 2), (13, 16), (32, 32))]
    jobs += [{"module": "kernelbench.kernels.compressor", "kernel": "_comp_emit", "signature": EMIT_SIG,
              "constexprs": {"DD": dd, "C": c, "R": 64, "ROWS": rows, "ROTATE": rot, "NG_P2": 8 if dd == 512 else 1,
                             "RNE_FIX": False, "REG": reg}, "num_warps": 4, "num_stages": 1}
             for dd, c, rot in ((512, 2, False), (512, 1, False), (128, 2, True)) for rows in sorted({c["ROWS"] for c in cfgs})
             for reg in (False, True)]
    dflt = KC.step_default({})
    jobs += [{"module": "kernelbench.kernels.compressor", "kernel": "_comp_step", "signature": STEP_SIG,
              "constexprs": {"DD": dd, "C": c, "R": 64, "BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": dflt["BLOCK_K"],
                             "SPLIT": sp, "ROWS": min(dflt["ROWS"], c * ratio), "RB": 16 if rot else 4, "ROTATE": rot,
                             "DOT_UPCAST": False, "RNE_FIX": False},
              "num_warps": dflt["num_warps"], "num_stages": dflt["num_stages"]}
             for dd, c, ratio, rot, bm, sp, bn in ((512, 2, 4, False, 16, 16, 64), (512, 1, 128, False, 32, 4, 64),
                                                   (128, 2, 4, True, 16, 32, 64), (512, 1, 128, False, 16, 16, 32))]
    reps = compile_sm120(jobs)
    for job, rep in zip(jobs, reps):
        assert not sm120_problems(rep, job, SM120_KNOWN_UNFIT), (job["kernel"], job["constexprs"], rep)
        if job["kernel"] in ("_comp_project", "_comp_step"):
            assert rep["mma"] > 0, job["constexprs"]
    assert not stale_unfit(jobs, reps, SM120_KNOWN_UNFIT)
