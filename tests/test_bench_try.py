"""bench --try: a case timed again with a trial's configs, on the same inputs (kernelbench/harness/bench.py
measure_trial). The timer is replaced by a stand-in that calls the implementation once on CPU inputs (the
interpreter) and reports the config the kernel ran with, so the routing of the config is what is tested."""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from click.testing import CliRunner

from kernelbench import registry, tuned_configs
from kernelbench.cli import main
from kernelbench.decoder.trials import parse_trial
from kernelbench.harness.bench import measure_trial

TOY = str(Path(__file__).with_name("kb_toy.py"))
PARAMS = {"M": 1, "N": 64, "K": 128}


@pytest.fixture()
def toy():
    registry.load_module(TOY)
    import kb_toy
    ran = []

    # a second impl that looks up nothing: its own default_config decides, as moe_gate's does
    def no_lookup(x, w, config=None):
        cfg = config or kb_toy.default_config({})
        ran.append(("no_lookup", dict(cfg)))
        return kb_toy.toy_mm(x, w, config=cfg)
    registry.register_impl(kb_toy.OP, "triton_nolookup", backend="triton", default_config=kb_toy.default_config,
                           replace=True)(no_lookup)
    yield kb_toy, ran
    registry.unregister_impl(kb_toy.OP, "triton_nolookup")


def _measure(ran):
    """measure(spec, impl, params, config=None, **timing_kw) stand-in: one call on the inputs of seed 0, checked
    against the reference; the measurement carries the config it was given."""
    def measure(spec, impl, params, config=None, **_):
        inputs = spec.make_inputs(params, torch.Generator().manual_seed(0), "cpu", "normal")
        with tuned_configs.record_resolutions() as seen:
            y = impl.fn(**inputs, **({"config": config} if config is not None else {}))
        torch.testing.assert_close(y, spec.reference(**inputs), rtol=1e-2, atol=1e-2)
        ran.append(("measure", config, [(r.source, dict(r.config)) for r in seen]))
        return SimpleNamespace(config=config, notes=[])
    return measure


def test_a_trial_is_pinned_at_the_ops_lookup_and_the_row_keeps_the_config_that_ran(toy):
    kb_toy, ran = toy
    spec, impl = registry.get_op(kb_toy.OP), registry.get_impl(kb_toy.OP, "triton")
    m, how = measure_trial(_measure(ran), spec, impl, PARAMS, parse_trial('toy_mm={"BLOCK_N": 16}'), "cpu")
    want = {**kb_toy.default_config({}), "BLOCK_N": 16}
    assert how == "lookup" and m.config == want
    assert ran == [("measure", None, [("trial", want)])]               # timed once, the lookup answered the pin
    assert m.notes == ['try toy_mm={"BLOCK_N": 16}: pinned at 1 lookup(s) of toy_mm']


def test_an_impl_without_lookups_gets_the_pin_over_its_default_config(toy):
    kb_toy, ran = toy
    spec, impl = registry.get_op(kb_toy.OP), registry.get_impl(kb_toy.OP, "triton_nolookup")
    m, how = measure_trial(_measure(ran), spec, impl, PARAMS, parse_trial('toy_mm@M=1={"BLOCK_K": 64}'), "cpu")
    want = {**kb_toy.default_config({}), "BLOCK_K": 64}
    assert how == "default_config" and m.config == want
    # the untimed probe ran the impl's own default (no lookup answered the pin); the one timing ran the pin
    assert ran == [("no_lookup", kb_toy.default_config({})), ("no_lookup", want), ("measure", want, [])]
    assert "over triton_nolookup's default_config" in m.notes[0]


def test_trials_that_do_not_apply_time_nothing_and_say_why(toy):
    kb_toy, ran = toy
    spec = registry.get_op(kb_toy.OP)
    lookup_impl, plain = registry.get_impl(kb_toy.OP, "triton"), registry.get_impl(kb_toy.OP, "triton_nolookup")
    m, why = measure_trial(_measure(ran), spec, lookup_impl, PARAMS, parse_trial('rms_norm={"num_warps": 2}'), "cpu")
    assert m is None and "names no pin of toy_mm" in why and ran == []
    m, why = measure_trial(_measure(ran), spec, plain, PARAMS, parse_trial('toy_mm@M=16={"BLOCK_K": 64}'), "cpu")
    assert m is None and "its filters exclude this case" in why
    assert not [r for r in ran if r[0] == "measure"]                    # nothing timed


def test_cli_checks_the_trial_before_anything_else():
    """A misspelt --try is refused with the trial parser's reason on any machine (before the GPU check)."""
    r = CliRunner().invoke(main, ["bench", "rms_norm", "--try", 'nosuchop={"num_warps": 2}'])
    assert r.exit_code == 2 and "unknown op 'nosuchop'" in r.output
    r = CliRunner().invoke(main, ["bench", "rms_norm", "--try", 'rms_norm={"NOPE": 2}'])
    assert r.exit_code == 2 and "unknown key 'NOPE'" in r.output
    r = CliRunner().invoke(main, ["bench", "rms_norm", "--try", 'KERNELBENCH_PDL=0;rms_norm={"num_warps": 2}'])
    assert r.exit_code == 2 and "KERNELBENCH_PDL is a setting of the decode step" in r.output


def test_a_trial_that_runs_a_config_already_timed_for_the_case_is_named_not_stored_twice():
    """Two trials resolving to one config (or a trial pinning what the plain row ran) would be a duplicate row of the
    store (the same impl, params, config, commit and run): repeated_config names the row that ran it first."""
    from kernelbench.harness.bench import repeated_config
    seen = {}
    assert repeated_config(seen, {"BLOCK_N": 32, "BLOCK_K": 32}, "triton") is None
    assert repeated_config(seen, {"BLOCK_N": 16, "BLOCK_K": 32}, "triton try1") is None
    assert repeated_config(seen, {"BLOCK_K": 32, "BLOCK_N": 16}, "triton try2") == "triton try1"
    assert repeated_config(seen, {"BLOCK_N": 32, "BLOCK_K": 32}, "triton try3") == "triton"
    assert repeated_config(seen, {"BLOCK_N": 64, "BLOCK_K": 32}, "triton try4") is None


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU; runs on the device machine "
                    "(scripts/device_gpu_tests.sh rest)")
def test_bench_times_a_trial_row_beside_the_plain_one_on_the_gpu(tmp_path):
    """`kernelbench bench toy_mm --try ...` on a GPU: each case gives the plain row and a 'triton try1' row, both
    rechecked against the reference; the trial row is stored with the config that ran (BLOCK_N 16 over the
    default), a series of its own for history and gate; a trial of another op times nothing."""
    import json
    out = tmp_path / "rows.json"
    r = CliRunner().invoke(main, ["bench", "toy_mm", "--module", TOY, "--impl", "triton", "--max-time", "0.05",
                                  "--db", f"sqlite:///{tmp_path / 'kb.sqlite'}", "--json", str(out),
                                  "--try", 'toy_mm={"BLOCK_N": 16}', "--try", 'rms_norm={"num_warps": 2}',
                                  "--try", 'toy_mm@M=1,16={"BLOCK_N": 16}'])
    assert r.exit_code == 0, r.output
    rows = json.loads(out.read_text())["results"]
    plain = [x for x in rows if x["trial"] is None]       # a plain row keeps the config it resolved, too
    tried = [x for x in rows if x["trial"] == 'toy_mm={"BLOCK_N": 16}']
    assert len(plain) == len(tried) == 2 and all(x["verified"] for x in rows)
    assert all(x["config"]["BLOCK_N"] == 16 and x["config"]["BLOCK_K"] == 32 for x in tried)
    assert all((x["config"] or {}).get("BLOCK_N") != 16 for x in plain)
    assert "triton try1" in r.output and "try2" not in r.output.replace("try2: rms_norm", "")
    # try3 repeats try1 at both cases: named (rich wraps long lines: compare with the whitespace folded), not stored
    assert " ".join(r.output.split()).count("ran the config of row 'triton try1'") == 2
    assert not [x for x in rows if (x["trial"] or "").startswith("toy_mm@")]
