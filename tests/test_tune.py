"""The tuner on the Triton interpreter with a fake timer: invalid configs are recorded with their
reason, an interrupted tune resumes without redoing trials, crashes and hangs are isolated, the
interleaved re-time picks the winner, and the exported JSON drives the kernel with fallbacks."""
import json
import os
import warnings
from pathlib import Path

import pytest
import torch

from kernelbench import registry, tuned_configs
from kernelbench.harness import tune
from kernelbench.db import schema
from kernelbench.db.store import Store, raw_execute
from kernelbench.harness.fingerprint import fingerprint

TOY = str(Path(__file__).with_name("kb_toy.py"))
pytestmark = pytest.mark.skipif(os.environ.get("TRITON_INTERPRET") != "1",
                                reason="runs the toy kernel in the Triton interpreter (TRITON_INTERPRET=1)")

GOOD_SMALL = {"BLOCK_N": 16, "BLOCK_K": 32, "num_warps": 4, "num_stages": 2}
GOOD_BIG = {"BLOCK_N": 32, "BLOCK_K": 64, "num_warps": 4, "num_stages": 2}
WRONG = {"BLOCK_N": 32, "BLOCK_K": 32, "num_warps": 4, "num_stages": 2, "skip_last_k": True}
TOO_BIG = {"BLOCK_N": 256, "BLOCK_K": 256, "num_warps": 4, "num_stages": 4}   # ~1.3 MB of smem on sm_120
NO_COMPILE = {"BLOCK_N": 32, "BLOCK_K": 48, "num_warps": 4, "num_stages": 2}  # arange of 48: not a power of 2


@pytest.fixture(scope="module")
def toy():
    registry.load_module(TOY)
    return registry.get_op("toy_mm")


@pytest.fixture
def store(tmp_path):
    s = Store(f"sqlite:///{tmp_path / 'kb.sqlite'}")
    yield s, s.environment_id(fingerprint("cpu"))
    s.dispose()


def impl_with(space, name="tune_test"):
    base = registry.get_impl("toy_mm", "triton")
    registry.register_impl("toy_mm", name, backend="triton", configs=lambda p: list(space),
                           default_config=lambda p: dict(space[0]), replace=True)(base.fn)
    return registry.get_impl("toy_mm", name)


class CountingTimer:
    def __init__(self, fail_after=None):
        self.calls, self.fail_after = [], fail_after

    def __call__(self, calls, config):
        if self.fail_after is not None and len(self.calls) >= self.fail_after:
            raise KeyboardInterrupt("simulated interruption")
        self.calls.append(tune.canon(config))
        calls[0]()
        return [100.0 / (config["BLOCK_N"] * config["BLOCK_K"]) * (1 + 0.01 * i) for i in range(5)]


def test_invalid_configs_are_recorded_with_reasons_and_best_valid_is_chosen(toy, store):
    s, env = store
    impl = impl_with([GOOD_SMALL, WRONG, TOO_BIG, NO_COMPILE, GOOD_BIG])
    timer = CountingTimer()
    res = tune.tune_one(toy, impl, {"M": 16, "N": 64, "K": 128}, store=s, env_id=env, device="cpu", timer=timer,
                        modules=(TOY,))
    by = {tune.canon(t.config): t for t in res.trials}
    assert by[tune.canon(WRONG)].status == "invalid_verify" and "mismatch" in by[tune.canon(WRONG)].reason
    assert by[tune.canon(TOO_BIG)].status == "invalid_smem" and "101376" in by[tune.canon(TOO_BIG)].reason
    assert by[tune.canon(NO_COMPILE)].status == "invalid_compile" and by[tune.canon(NO_COMPILE)].reason
    assert by[tune.canon(GOOD_SMALL)].status == by[tune.canon(GOOD_BIG)].status == "ok"
    # configs that failed a static check were never run
    assert tune.canon(TOO_BIG) not in timer.calls and tune.canon(NO_COMPILE) not in timer.calls
    assert res.chosen == GOOD_BIG
    # the best two were re-timed interleaved, 3 rounds each
    assert timer.calls[-6:] == [tune.canon(GOOD_BIG), tune.canon(GOOD_SMALL)] * 3
    rows = raw_execute(s, "select status, reason from tune_trial")
    assert sorted(r[0] for r in rows) == sorted(["ok", "ok", "invalid_verify", "invalid_smem", "invalid_compile"])
    assert all(r[1] for r in rows if r[0] != "ok")
    assert raw_execute(s, "select count(*) from tune_choice")[0][0] == 1
    assert res.key == {"M": 16, "N": 64, "K": 128}   # the key the kernel passes to tuned_configs.lookup


def test_interrupted_tune_resumes_without_redoing_trials(toy, store):
    s, env = store
    space = [GOOD_SMALL, GOOD_BIG, {"BLOCK_N": 32, "BLOCK_K": 32, "num_warps": 4, "num_stages": 2}]
    impl = impl_with(space, "resume_test")
    params = {"M": 1, "N": 64, "K": 128}
    first = CountingTimer(fail_after=1)
    with pytest.raises(KeyboardInterrupt):
        tune.tune_one(toy, impl, params, store=s, env_id=env, device="cpu", timer=first, sm120_check=False)
    assert first.calls == [tune.canon(GOOD_SMALL)]
    assert raw_execute(s, "select count(*) from tune_trial")[0][0] == 1
    second = CountingTimer()
    res = tune.tune_one(toy, impl, params, store=s, env_id=env, device="cpu", timer=second, sm120_check=False,
                        top_k=1)
    assert tune.canon(GOOD_SMALL) not in second.calls          # finished trial not redone
    assert sorted(second.calls) == sorted(tune.canon(c) for c in space[1:])
    assert [t.resumed for t in res.trials] == [True, False, False]
    assert raw_execute(s, "select count(*) from tune_trial")[0][0] == 3
    assert res.chosen == GOOD_BIG


def test_crash_and_hang_are_isolated_and_recorded(toy, store):
    s, env = store
    crash = dict(GOOD_SMALL, crash=True)
    hang = dict(GOOD_SMALL, hang=True)
    impl = impl_with([GOOD_SMALL, crash, hang, GOOD_BIG], "isolate_test")
    res = tune.tune_one(toy, impl, {"M": 16, "N": 64, "K": 128}, store=s, env_id=env, device="cpu", isolate=True,
                        timer_ref=f"{TOY}:fake_timer", modules=(TOY,), trial_timeout_s=10, sm120_check=False)
    by = {tune.canon(t.config): t for t in res.trials}
    assert by[tune.canon(crash)].status == "crash" and "exit code" in by[tune.canon(crash)].reason
    assert by[tune.canon(hang)].status == "timeout"
    assert by[tune.canon(GOOD_BIG)].status == "ok"   # the worker was restarted after both
    assert res.chosen == GOOD_BIG
    assert raw_execute(s, "select count(*) from tune_trial where status in ('crash', 'timeout')")[0][0] == 2


def test_export_drives_the_kernel_and_falls_back(toy, store, tmp_path, monkeypatch):
    s, env = store
    impl = impl_with([GOOD_SMALL, GOOD_BIG], "export_test")
    res = tune.tune_one(toy, impl, {"M": 16, "N": 64, "K": 128}, store=s, env_id=env, device="cpu",
                        timer=CountingTimer(), sm120_check=False)
    path = tune.export([res], tmp_path / "v1.json", command="pytest")
    data = json.loads(path.read_text())
    assert data["version"] == 1 and data["entries"][0]["config"] == GOOD_BIG and data["entries"][0]["device"] == "cpu"
    # exporting again replaces the entry instead of duplicating it
    tune.export([res], path)
    assert len(json.loads(path.read_text())["entries"]) == 1
    monkeypatch.setenv(tuned_configs.ENV_FILE, str(path))
    default = {"BLOCK_N": 16, "BLOCK_K": 32, "num_warps": 4, "num_stages": 2}
    assert tuned_configs.lookup("toy_mm", {"M": 16, "N": 64, "K": 128}, default, device="cpu") == GOOD_BIG
    with warnings.catch_warnings(record=True) as w:            # nearest shape on this device, with a warning
        warnings.simplefilter("always")
        assert tuned_configs.lookup("toy_mm", {"M": 16, "N": 128, "K": 128}, default, device="cpu") == GOOD_BIG
        assert tuned_configs.lookup("toy_mm", {"M": 16, "N": 64, "K": 128}, default, device="NVIDIA X") == GOOD_BIG
    assert len(w) == 2 and "tuned for" in str(w[0].message)
    # never across the op's batch (toy_mm's batch_key M): another M keeps the default
    assert tuned_configs.resolve("toy_mm", {"M": 3, "N": 64, "K": 128}, default, device="cpu").config == default
    assert tuned_configs.lookup("other_op", {"M": 16}, default, device="cpu") == default
    # the kernel reads the tuned config (observed through its lookup) and still computes the right thing
    spec = registry.get_op("toy_mm")
    inputs = spec.make_inputs({"M": 16, "N": 64, "K": 128}, torch.Generator().manual_seed(3), "cpu", "normal")
    with tuned_configs.observe_lookups() as seen:
        y = impl.fn(**inputs)
    assert seen == [("toy_mm", {"M": 16, "N": 64, "K": 128})]
    torch.testing.assert_close(y, spec.reference(**inputs), rtol=1e-4, atol=1e-4)
    # a corrupt file named by KERNELBENCH_TUNED is an error naming the variable (tests/test_verdicts.py)
    bad = tmp_path / "corrupt.json"
    bad.write_text("{not json")
    monkeypatch.setenv(tuned_configs.ENV_FILE, str(bad))
    with pytest.raises(tuned_configs.TuningError, match="unreadable"):
        tuned_configs.lookup("toy_mm", {"M": 16, "N": 64, "K": 128}, default, device="cpu")
    with pytest.raises(ValueError, match="not valid JSON"):
        tune.export([res], bad)


TOY_SPACE = [{"BLOCK_N": bn, "BLOCK_K": bk, "num_warps": w, "num_stages": 2}
             for bn in (16, 32, 64) for bk in (32, 64) for w in (2, 4, 8)]


def test_sampled_search_keeps_the_default_and_is_deterministic(toy):
    impl = impl_with(TOY_SPACE, "sample_test")
    a, left_a = tune.candidate_configs(impl, {"M": 16}, max_trials=8)
    b, _ = tune.candidate_configs(impl, {"M": 16}, max_trials=8)
    # a quarter of the places is kept for the second phase (tune_one)
    assert tune.refine_slots(len(TOY_SPACE), 8) == 2
    assert a == b and len(a) == 6 and left_a == len(TOY_SPACE) - 6
    assert a[0] == TOY_SPACE[0]
    # half of the places after the default go to its neighbours (one option changed), the rest to the sample
    near = tune.neighbours(TOY_SPACE, TOY_SPACE[0])
    assert len(near) == 2 + 1 + 2 and all(c in near for c in a[1:3])
    full, left = tune.candidate_configs(impl, {"M": 16}, max_trials=64)
    assert full == TOY_SPACE and left == 0 and tune.refine_slots(len(TOY_SPACE), 64) == 0


def test_neighbours_differ_in_exactly_one_option():
    c = {"BM": 16, "BN": 64, "RB": 16}
    space = [c, {"BM": 32, "BN": 64, "RB": 16}, {"BM": 32, "BN": 32, "RB": 16}, {"BM": 16, "BN": 64},
             {"BM": 16, "BN": 64, "RB": 16, "Q_NORM": "row"}, {"BM": 16, "BN": 64, "RB": 4}]
    assert tune.neighbours(space, c) == [space[1], space[3], space[4], space[5]]


class TableTimer:
    """Samples from a table of medians by config (50 us for a config it does not name)."""
    def __init__(self, table):
        self.table, self.calls = {tune.canon(k): v for k, v in table}, []

    def __call__(self, calls, config):
        self.calls.append(tune.canon(config))
        calls[0]()
        return [self.table.get(tune.canon(config), 50.0)] * 3


# a chain: config i differs from i - 1 and i + 1 in one option (a or b), from every other in both (the toy kernel
# ignores keys it does not read)
CHAIN = [{**GOOD_SMALL, "a": i // 2 + 1, "b": (i + 1) // 2 + 1} for i in range(32)]     # positive: valid tuned entries


def test_the_chain_has_two_neighbours_a_link():
    assert tune.neighbours(CHAIN, CHAIN[5]) == [CHAIN[4], CHAIN[6]] and tune.neighbours(CHAIN, CHAIN[0]) == [CHAIN[1]]


def _tune_chain(toy, store, name, table, max_trials=8):
    s, env = store
    impl = impl_with(CHAIN, name)
    params = {"M": 16, "N": 64, "K": 128}
    first, _ = tune.candidate_configs(impl, params, max_trials=max_trials)
    return first, lambda timer: tune.tune_one(toy, impl, params, store=s, env_id=env, device="cpu", timer=timer,
                                              sm120_check=False, max_trials=max_trials, top_k=1)


def test_second_phase_finds_the_better_neighbour_the_sample_missed(toy, store):
    """Phase 1 draws 6 of 32 (the default, its one neighbour, 4 at random); the fastest of them (q) has a neighbour p
    it did not draw, faster still: phase 2 (2 places) tries q's untried neighbours and chooses p."""
    first, run = _tune_chain(toy, store, "climb_test", [])
    drawn = [CHAIN.index(c) for c in first]
    assert drawn[:2] == [0, 1] and len(drawn) == 6
    q, p = next((q, p) for q in drawn[2:] for p in (q - 1, q + 1) if 0 <= p < len(CHAIN) and p not in drawn)
    res = run(TableTimer([(CHAIN[q], 10.0), (CHAIN[p], 5.0)]))
    extra = [CHAIN.index(t.config) for t in res.trials[6:]]
    assert len(res.trials) <= 8 and p in extra and set(extra) <= {q - 1, q + 1}
    assert res.chosen == CHAIN[p] and res.untried == len(CHAIN) - len(res.trials)


def test_second_phase_climbs_along_the_chain(toy, store):
    """Faster towards a link P in the middle of the widest gap of phase 1's draw: every trial of phase 2 is a
    neighbour of a best config before it, and the search ends nearer P than anything phase 1 drew."""
    first, run = _tune_chain(toy, store, "chain_test", [], max_trials=16)
    drawn = sorted(CHAIN.index(c) for c in first)
    a, b = max(zip(drawn, drawn[1:]), key=lambda ab: ab[1] - ab[0])
    assert len(first) == 12 and b - a >= 3
    peak = (a + b) // 2
    res = run(TableTimer([(c, 10.0 + abs(i - peak)) for i, c in enumerate(CHAIN)]))
    assert 12 < len(res.trials) <= 16
    for j in range(len(first), len(res.trials)):
        # a round holds the best's untried neighbours (two at most on a chain): the best before it or one trial earlier
        bests = {tune.canon(min(res.trials[:i], key=lambda t: t.median_us).config) for i in (j - 1, j)}
        assert any(res.trials[j].config in tune.neighbours(CHAIN, json.loads(b)) for b in bests)
    assert abs(CHAIN.index(res.chosen) - peak) < min(abs(i - peak) for i in drawn)


def test_second_phase_stops_at_a_local_best(toy, store):
    """The default is the fastest and its one neighbour was drawn in phase 1: phase 2 tries nothing more."""
    first, run = _tune_chain(toy, store, "local_best_test", [])
    res = run(TableTimer([(CHAIN[0], 1.0)]))
    assert [t.config for t in res.trials] == first and res.chosen == CHAIN[0]
    assert res.untried == len(CHAIN) - len(first)


def test_a_cuda_fault_is_a_crash_not_an_invalid_config(toy, store):
    assert tune.cuda_fault(RuntimeError("CUDA error: an illegal memory access was encountered"))
    assert not tune.cuda_fault(ValueError("BLOCK_K must divide K"))
    s, env = store
    impl = impl_with([GOOD_SMALL], "fault_test")
    spec = registry.get_op("toy_mm")
    bench = tune.Bench(spec, impl, {"M": 1, "N": 64, "K": 128}, "cpu")

    def faulting_verify(config):
        raise RuntimeError("CUDA error: unspecified launch failure")
    bench.verify = faulting_verify
    t = bench.trial(GOOD_SMALL, CountingTimer())
    assert t.status == "crash" and "CUDA fault" in t.reason


def test_tune_run_skips_past_the_budget_and_survives_a_failing_shape(toy, store, monkeypatch):
    s, env = store
    impl = impl_with([GOOD_SMALL])
    cases = [{"M": 1, "N": 64, "K": 128}, {"M": 16, "N": 64, "K": 128}]
    kw = dict(store=s, env_id=env, device="cpu", timer_ref="cpu", interpret=True, isolate=False, max_trials=4,
              top_k=1, rounds=1, trial_timeout=60.0, sm120_check=False, git_commit="", no_export=True)
    seen, logged = [], []
    results, skipped = tune.tune_run([(toy, impl, cases)], budget_s=0.0, advance=seen.append, **kw)
    assert results == [] and len(skipped) == 2 and len(seen) == 2 and skipped[0].startswith("toy_mm/tune_test ")

    def flaky(spec, impl, params, **_):
        if params["M"] == 1:
            raise RuntimeError("boom")
        return tune.TuneResult(spec.name, impl.name, params, params, "cpu", [], None, None)
    monkeypatch.setattr(tune, "tune_one", flaky)
    results, skipped = tune.tune_run([(toy, impl, cases)], budget_s=60.0, log=logged.append, **kw)
    assert [r.key["M"] for r in results] == [16] and skipped == []
    assert any("failed: RuntimeError: boom" in line for line in logged)
    assert tune.summary_rows(results)[0][:3] == ("toy_mm", "tune_test", tune.canon(cases[1])[:60])


def test_tune_run_starts_no_case_it_cannot_set_up_within_the_budget(toy, store, monkeypatch):
    """A case's setup runs before tune_one checks the clock, so a case is not started with less than MIN_CASE_S
    (or a tenth of the budget) left: the first case here takes 55 of 60 s, the second is listed as not tuned."""
    s, env = store
    impl = impl_with([GOOD_SMALL])
    cases = [{"M": 1, "N": 64, "K": 128}, {"M": 16, "N": 64, "K": 128}]
    clock = [1000.0]
    monkeypatch.setattr(tune.time, "monotonic", lambda: clock[0])

    def slow(spec, impl, params, **_):
        clock[0] += 55.0
        return tune.TuneResult(spec.name, impl.name, params, params, "cpu", [], None, None)
    monkeypatch.setattr(tune, "tune_one", slow)
    kw = dict(store=s, env_id=env, device="cpu", timer_ref="cpu", interpret=True, isolate=False, max_trials=4,
              top_k=1, rounds=1, trial_timeout=60.0, sm120_check=False, git_commit="", no_export=True)
    results, skipped = tune.tune_run([(toy, impl, cases)], budget_s=60.0, **kw)
    assert [r.key["M"] for r in results] == [1] and skipped == ["toy_mm/tune_test " + toy.label(cases[1])]
    clock[0] = 1000.0
    results, skipped = tune.tune_run([(toy, impl, cases)], budget_s=200.0, **kw)
    assert [r.key["M"] for r in results] == [1, 16] and skipped == []


def test_tune_command_claims_only_the_exports_that_happened(toy, tmp_path):
    """With no passing verify of the chosen config's path in the database, export() refuses the choice: nothing is
    written and the command says so, naming the op and the verify to run, instead of "choices exported to PATH"
    (H200, 2026-12-02: fp8_linear at M=64). After that verify, the same tune exports the choice and says where."""
    from click.testing import CliRunner

    from kernelbench.cli import main
    url = f"sqlite:///{tmp_path / 'kb.sqlite'}"
    out = tmp_path / "tuned.json"
    args = ["tune", "toy_mm", "--impl", "triton", "--batch", "1", "--interpret", "--no-isolate", "--no-sm120-check",
            "--max-trials", "4", "--top-k", "1", "--rounds", "1", "--module", TOY, "--export", str(out), "--db", url]
    r = CliRunner().invoke(main, args)
    assert r.exit_code == 0, r.output
    assert "exported to" not in r.output and not out.exists()
    assert "1 choice not exported (refused, nothing written):" in r.output
    refusal = [line for line in r.output.splitlines() if "has no passing verification" in line][-1]
    assert refusal.startswith("  toy_mm/triton: config") and "`kernelbench verify toy_mm --impl triton --device " \
                                                                 "cpu` first" in refusal, r.output
    r = CliRunner().invoke(main, ["verify", "toy_mm", "--impl", "triton", "--device", "cpu", "--profile", "ci",
                                  "--examples", "2", "--kernel-module", TOY, "--db", url])
    assert r.exit_code == 0, r.output
    r = CliRunner().invoke(main, args)
    assert r.exit_code == 0, r.output
    assert f"1 choice exported to {out}" in r.output and "not exported" not in r.output
    entry, = json.loads(out.read_text())["entries"]
    assert (entry["op"], entry["key"]) == ("toy_mm", {"M": 1, "N": 64, "K": 128})


def test_export_summary_counts_exported_refused_and_unchosen_results():
    def result(m, chosen=None, to="", refused=""):
        return tune.TuneResult("toy_mm", "triton", {"M": m}, {"M": m}, "cpu", [], chosen, 1.0, exported_to=to,
                               export_refused=refused)
    lines = tune.export_summary([result(1, GOOD_SMALL, to="/x/t.json"), result(2, GOOD_SMALL, to="/x/t.json"),
                                 result(4, GOOD_BIG, refused="toy_mm/triton: config ... run `kernelbench verify`"),
                                 result(8)])
    assert lines == ["2 choices exported to /x/t.json", "1 choice not exported (refused, nothing written):",
                     '  toy_mm/triton: config ... run `kernelbench verify` (key {"M":4})',
                     '1 tuned without a valid config, nothing to export: toy_mm/triton {"M":8}']
    assert tune.export_summary([result(1, GOOD_SMALL, refused="no")]) == ["1 choice not exported (refused, nothing "
                                                                          "written):", '  no (key {"M":1})']
    assert tune.export_summary([]) == []
