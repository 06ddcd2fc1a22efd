"""The verification engine on toy ops registered here: every check fires on the bug it exists for,
results land in the database, the example database replays a failure first, and the CLI's errors
and exit codes."""
from __future__ import annotations

import json
import sqlite3

import pytest
import torch
from click.testing import CliRunner
from hypothesis import strategies as st

from kernelbench import registry
from kernelbench.commands.verify import command
from kernelbench.harness.verify_run import run_verify
from kernelbench.db.store import Store
from kernelbench.registry import Cost, OpSpec, Tolerance, register_impl, register_op
from kernelbench.harness.verify import Options, verify_pair
from kernelbench.harness.verify_check import Example, check_example, poisoned_allocations

TOY, RING = "toy_scale_rows", "toy_ring_write"


# ---- toy ops ---------------------------------------------------------------------------------------
def toy_scale_rows(x, w, alpha):
    """x [M, N] bf16, w [N] fp32 -> y [M, N] bf16 = x * w * alpha, r [M] fp32 = row sums of y (fp32 math)."""
    from kernelbench.reference.precision import acc
    y = acc(x) * acc(w) * alpha
    return y.to(torch.bfloat16), y.sum(-1).float()


def _toy_inputs(p, gen, device, values):
    scale = 1e3 if values == "large" else 1.0
    x = (torch.randn(p["M"], p["N"], generator=gen) * scale).to(torch.bfloat16)
    w = torch.rand(p["N"], generator=gen) + 0.5
    return {"x": x.to(device), "w": w.to(device), "alpha": 0.75}


def toy_ring_write(x, slots, seq_ids, cache):
    """In place: cache[seq, slot] = bf16(2x); returns y = bf16(2x)."""
    y = (x.float() * 2).to(torch.bfloat16)
    cache[seq_ids, slots] = y
    return y


def _ring_inputs(p, gen, device, values):
    t, b, w, d = p["T"], p["T"] + 1, p["W"], p["D"]
    return {"x": torch.randn(t, d, generator=gen).to(torch.bfloat16).to(device),
            "slots": torch.randint(0, w, (t,), generator=gen).to(device),
            "seq_ids": torch.randperm(b, generator=gen)[:t].to(device),
            "cache": torch.randn(b, w, d, generator=gen).to(torch.bfloat16).to(device)}


BF16_TOL = Tolerance(rtol=2.0 ** -7, atol=1e-6, rel_fro=2.0 ** -8, why="one fp32 product, one bf16 rounding")


@pytest.fixture(scope="module", autouse=True)
def toy_ops():
    register_op(OpSpec(
        name=TOY, family="toy", reference=toy_scale_rows, make_inputs=_toy_inputs, cases=lambda ss: [],
        strategy=lambda: st.fixed_dictionaries({"M": st.integers(1, 6), "N": st.integers(1, 64)}),
        cost=lambda p: Cost(2.0 * p["M"] * p["N"], 4.0 * p["M"] * p["N"]),
        tolerance=lambda p: {"y": BF16_TOL, "r": Tolerance(rtol=1e-5, atol=1e-4, why="fp32 sum of N terms")},
        outputs=("y", "r"), value_modes=("normal", "large")))
    register_op(OpSpec(
        name=RING, family="toy", reference=toy_ring_write, make_inputs=_ring_inputs, cases=lambda ss: [],
        strategy=lambda: st.fixed_dictionaries({"T": st.integers(1, 4), "W": st.integers(1, 8),
                                                "D": st.sampled_from([4, 16])}),
        cost=lambda p: Cost(p["T"] * p["D"], 6.0 * p["T"] * p["D"]),
        tolerance=lambda p: {"y": Tolerance(exact=True), "cache": Tolerance(exact=True)},
        outputs=("y",), inplace=("cache",)))
    yield
    for name in (TOY, RING):   # leave the registry as the other tests expect it
        registry._OPS.pop(name, None)
        registry._IMPLS.pop(name, None)


@pytest.fixture
def impl():
    """Register a toy implementation for one test."""
    added = []

    def reg(op, name, fn, **kw):
        register_impl(op, name, replace=True, **kw)(fn)
        added.append((op, name))
        return registry.get_op(op), registry.get_impl(op, name)

    yield reg
    for op, name in added:
        registry.unregister_impl(op, name)


def _opts(**kw):
    return Options(**{"device": "cpu", "examples": 25, "profile": "ci", "shrink_seconds": 30, **kw})


def _correct(x, w, alpha, config=None):
    y = x.float() * w * alpha
    return y.to(torch.bfloat16), y.sum(-1)


# ---- the checks ------------------------------------------------------------------------------------
def test_correct_implementation_passes_with_statistics(impl):
    spec, im = impl(TOY, "good", _correct)
    seen = []
    rep = verify_pair(spec, im, _opts(), seen.append)
    assert rep.status == "pass" and rep.n == 25 == len(seen)
    assert {r.example.layout for r in seen} == {"contiguous", "strided"}
    for r in seen:
        assert r.passed and r.stats["checks"] == {"inputs_unmodified": True, "deterministic": True}
        assert 0 <= r.stats["y"]["rel_fro"] <= 2.0 ** -8 and r.stats["y"]["cosine"] > 0.9999
    # the fp32 row sums differ from the fp64 reference's in the last bits: the statistics are measured
    assert any(r.stats["r"]["max_abs"] > 0 for r in seen)


def test_unwritten_output_element_is_caught(impl):
    def skips_last_row(x, w, alpha, config=None):
        y, r = _correct(x, w, alpha)
        out = torch.empty_like(y)
        out[:-1] = y[:-1]
        return out, r
    spec, im = impl(TOY, "skips_last_row", skips_last_row)
    rep = verify_pair(spec, im, _opts())
    f = rep.failures[0]
    assert f.example.params == {"M": 1, "N": 1} and f.stats["y"]["unwritten"] == 1
    assert "never written" in f.failure


def test_modified_input_is_caught(impl):
    def scribbles(x, w, alpha, config=None):
        out = _correct(x, w, alpha)
        x[0, 0] = x[0, 0] + 1
        return out
    spec, im = impl(TOY, "scribbles", scribbles)
    f = verify_pair(spec, im, _opts()).failures[0]
    assert "input 'x' was modified" in f.failure and f.example.params == {"M": 1, "N": 1}


def test_nondeterminism_is_caught_only_when_claimed(impl):
    calls = {"n": 0}

    def flips_order(x, w, alpha, config=None):   # alternate summation orders: last bits differ, within tolerance
        calls["n"] += 1
        y = x.float() * w * alpha
        r = y.sum(-1) if calls["n"] % 2 else y.flip(-1).cumsum(-1)[..., -1]
        return y.to(torch.bfloat16), r
    spec, im = impl(TOY, "flips", flips_order)
    rep = verify_pair(spec, im, _opts())
    assert rep.failed and "differs between two runs" in rep.failures[0].failure
    spec, im = impl(TOY, "flips_nondet", flips_order, deterministic=False)
    assert verify_pair(spec, im, _opts()).status == "pass"


def test_contract_violations_are_caught(impl):
    def wrong_dtype(x, w, alpha, config=None):
        y, r = _correct(x, w, alpha)
        return y.float(), r

    def wrong_count(x, w, alpha, config=None):
        return _correct(x, w, alpha)[0]

    def crashes(x, w, alpha, config=None):
        raise RuntimeError("launch failed")
    for fn, text in ((wrong_dtype, "dtype torch.float32, expected torch.bfloat16"),
                     (wrong_count, "returned 1 outputs, the op has 2"), (crashes, "RuntimeError: launch failed")):
        spec, im = impl(TOY, fn.__name__, fn)
        f = check_example(spec, im, Example(TOY, fn.__name__, {"M": 2, "N": 3}, "normal", 5), "cpu")
        assert not f.passed and text in f.failure, f.failure


def test_tolerance_is_applied_per_output(impl):
    def sloppy_sum(x, w, alpha, config=None):   # y right, r off by 1e-3 relative (tolerance 1e-5)
        y, r = _correct(x, w, alpha)
        return y, r * (1 + 1e-3)
    spec, im = impl(TOY, "sloppy", sloppy_sum)
    f = verify_pair(spec, im, _opts()).failures[0]
    assert f.stats["y"]["passed"] and not f.stats["r"]["passed"]
    assert f.stats["r"]["max_rel"] == pytest.approx(1e-3, rel=1e-2)


def test_strided_inputs_refused_clearly_pass(impl):
    def contiguous_only(x, w, alpha, config=None):
        if not (x.is_contiguous() and w.is_contiguous()):
            raise ValueError("x and w must be contiguous")
        return _correct(x, w, alpha)
    spec, im = impl(TOY, "contiguous_only", contiguous_only)
    rep = verify_pair(spec, im, _opts())
    assert rep.status == "pass" and 0 < rep.rejected < rep.n


def test_in_place_op_compares_the_mutated_input(impl):
    spec, good = impl(RING, "good", lambda x, slots, seq_ids, cache, config=None: toy_ring_write(x, slots, seq_ids, cache))
    assert verify_pair(spec, good, _opts()).status == "pass"

    def wrong_slot(x, slots, seq_ids, cache, config=None):
        y = (x.float() * 2).to(torch.bfloat16)
        cache[seq_ids, (slots + 1) % cache.shape[1]] = y
        return y
    spec, bad = impl(RING, "wrong_slot", wrong_slot)
    f = verify_pair(spec, bad, _opts()).failures[0]
    assert "output 'cache'" in f.failure and f.example.params["W"] == 2 and f.example.params["T"] == 1


def test_poisoning_is_scoped():
    with pytest.raises(RuntimeError):
        with poisoned_allocations():
            assert torch.isnan(torch.empty(3)).all()
            assert (torch.empty(2, dtype=torch.int32) == torch.iinfo(torch.int32).min).all()
            raise RuntimeError("boom")
    assert torch.empty.__name__ == "empty" and not hasattr(torch.empty, "__wrapped__")


def _rare_bug(x, w, alpha, config=None):
    y, r = _correct(x, w, alpha)
    if x.shape[1] > 40:
        y = y * 2
    return y, r


def test_explore_profile_replays_a_found_failure_first(impl, tmp_path, monkeypatch):
    monkeypatch.setenv("KERNELBENCH_HOME", str(tmp_path))
    spec, im = impl(TOY, "rare", _rare_bug)
    first = verify_pair(spec, im, _opts(profile="explore", examples=200))
    assert first.failed == 1 and first.failures[0].example.params["N"] == 41
    assert first.n > 1, "the first run had to search"
    assert any((tmp_path / "hypothesis").rglob("*")), "the failure was saved in the example database"
    again = verify_pair(spec, im, _opts(profile="explore", examples=200))
    assert again.failed == 1 and again.n == 1, "the saved failure is replayed first, before any new example"


# ---- recording and the command line ---------------------------------------------------------------
def test_results_recorded_for_every_example(impl, tmp_path):
    url = f"sqlite:///{tmp_path / 'kb.sqlite'}"
    impl(TOY, "good", _correct)
    impl(TOY, "skips", lambda x, w, alpha, config=None: (torch.empty_like(x), _correct(x, w, alpha)[1]))
    doc = run_verify([TOY], ["good", "skips"], device="cpu", examples=8, profile="ci", db=url)
    assert not doc["passed"]
    rows = Store(url).verify_results(doc["run_id"])
    by_impl = {name: [r for r in rows if r["impl"] == name] for name in ("good", "skips")}
    assert len(by_impl["good"]) == 8 and all(r["passed"] for r in by_impl["good"])
    assert all({"max_abs", "max_rel", "rel_fro", "cosine", "mismatches"} <= set(r["stats"]["y"]) for r in by_impl["good"])
    bad = by_impl["skips"]
    assert len(bad) == 1 and not bad[0]["passed"] and bad[0]["params"] == {"M": 1, "N": 1}
    assert bad[0]["repro"].startswith(f"kernelbench verify {TOY} --impl skips --params '{{\"M\":1,\"N\":1}}'")
    con = sqlite3.connect(tmp_path / "kb.sqlite")
    status, n_results, n_failed = con.execute("SELECT status, n_results, n_failed FROM verify_run").fetchone()
    assert (status, n_results, n_failed) == ("failed", 9, 1)


def test_cli_json_exit_codes_and_replay(tmp_path):
    url = f"sqlite:///{tmp_path / 'kb.sqlite'}"
    module = tmp_path / "user_kernels.py"
    module.write_text(
        "import torch\nfrom kernelbench.registry import register_impl\n\n"
        f"@register_impl({TOY!r}, 'user_bad')\n"
        "def bad(x, w, alpha, config=None):\n"
        "    y = x.float() * w * alpha\n"
        "    return y.to(torch.bfloat16), y[..., 1:].sum(-1)   # drops column 0 of the row sums\n")
    runner = CliRunner()
    try:
        res = runner.invoke(command, [TOY, "--impl", "user_bad", "--kernel-module", str(module), "--device", "cpu",
                                      "--examples", "10", "--profile", "ci", "--db", url, "--json"])
        assert res.exit_code == 1, res.output
        doc = json.loads(res.stdout)
        (fail,) = doc["failures"]
        assert fail["params"]["N"] == 1 and f"--kernel-module {module}" in fail["repro"]
        # replaying the printed example fails the same way (a fresh process would load the module anew)
        registry.unregister_impl(TOY, "user_bad")
        res = runner.invoke(command, [TOY, "--impl", "user_bad", "--kernel-module", str(module), "--db", url,
                                      "--params", json.dumps(fail["params"]), "--values", fail["values"],
                                      "--seed", str(fail["seed"]), "--layout", fail["layout"], "--device", "cpu"])
        assert res.exit_code == 1 and "FAIL" in res.output and "output 'r'" in res.output
    finally:
        registry.unregister_impl(TOY, "user_bad")
    res = runner.invoke(command, [TOY, "--impl", "reference", "--device", "cpu", "--examples", "3", "--profile", "ci",
                                  "--db", url])
    assert res.exit_code == 0 and "pass" in res.output


def test_cli_clear_errors(tmp_path, monkeypatch):
    runner = CliRunner()
    bad = tmp_path / "bad.sqlite"
    bad.write_bytes(b"garbage " * 1000)
    res = runner.invoke(command, [TOY, "--device", "cpu", "--db", f"sqlite:///{bad}", "--examples", "1"])
    assert res.exit_code == 1 and "corrupt" in res.output
    res = runner.invoke(command, ["no_such_op", "--device", "cpu", "--db", f"sqlite:///{tmp_path / 'ok.sqlite'}"])
    assert res.exit_code == 1 and "unknown op 'no_such_op'" in res.output
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    res = runner.invoke(command, [TOY, "--device", "cuda"])
    assert res.exit_code == 1 and "no CUDA GPU is visible" in res.output
    res = runner.invoke(command, [TOY, "--device", "cpu", "--params", "{not json"])
    assert res.exit_code == 2 and "not JSON" in res.output


def test_cli_where_filters_the_shape_sets_cases(tmp_path):
    """`verify --where KEY=V` (bench's and tune's filter) runs only the shape set's cases whose params match; a
    filter that matches none of the named ops' cases, or one without a shape set, is a usage error before anything
    runs."""
    url = f"sqlite:///{tmp_path / 'kb.sqlite'}"
    runner = CliRunner()
    base = ["rms_norm", "--impl", "reference", "--device", "cpu", "--examples", "0", "--db", url]
    res = runner.invoke(command, [*base, "--shapes", "tiny", "--json"])
    assert res.exit_code == 0 and json.loads(res.stdout)["pairs"][0]["examples"] == 4
    res = runner.invoke(command, [*base, "--shapes", "tiny", "--where", "M=3", "--json"])
    assert res.exit_code == 0 and json.loads(res.stdout)["pairs"][0]["examples"] == 2
    res = runner.invoke(command, [*base, "--shapes", "tiny", "--where", "M=7"])
    assert res.exit_code == 2 and "no tiny case of rms_norm matches --where M=7" in res.output
    no_shapes = ["rms_norm", "--impl", "reference", "--device", "cpu", "--examples", "1", "--db", url]
    res = runner.invoke(command, [*no_shapes, "--where", "M=3"])
    assert res.exit_code == 2 and "name one with --shapes" in res.output


def test_copies_keep_the_spec_layout_and_strided_views_hide_poison():
    from kernelbench.harness.verify_check import materialize
    base = torch.arange(24.0).view(4, 6)
    inputs = {"v": base[:, 1:5:2], "w": torch.arange(5.0), "n": 3}
    same = materialize(inputs)
    assert same["v"].stride() == (6, 2) and torch.equal(same["v"], inputs["v"])
    assert same["v"].data_ptr() != inputs["v"].data_ptr() and same["n"] == 3
    strided = materialize(inputs, "strided", keep=("w",))
    assert torch.equal(strided["v"], inputs["v"]) and not strided["v"].is_contiguous()
    assert strided["w"].is_contiguous()
    # reading the view's storage as if it were contiguous meets the poisoned padding
    flat = torch.as_strided(strided["v"], (inputs["v"].numel(),), (1,))
    assert torch.isnan(flat).any()


def test_an_sm90_fp8_miss_points_at_the_adder_and_the_setting():
    # session 46: shared_expert's outlier miss on the H200 came from the QGMMA adder; verify names the setting that
    # tells it from a bug, only for ops with fp8 dots, only on sm_90, and only when the dots are not promoted already
    from kernelbench.harness.verify_run import fp8_adder_note
    note = fp8_adder_note({"shared_expert", "rms_norm"}, (9, 0), 0)
    assert note.startswith("shared_expert:") and "KERNELBENCH_FP8_PROMOTE=32" in note and "rms_norm" not in note
    assert fp8_adder_note({"rms_norm"}, (9, 0), 0) is None
    assert fp8_adder_note({"fp8_linear"}, (12, 0), 0) is None
    assert fp8_adder_note({"fp8_linear"}, (9, 0), 32) is None
    assert fp8_adder_note(set(), (9, 0), 0) is None
