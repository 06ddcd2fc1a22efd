"""decode-bench --try: configs judged in the step (kernelbench/decoder/trials.py, decode_bench.try_configs)."""
from __future__ import annotations

import json
import os

import pytest
import torch
from click.testing import CliRunner

from kernelbench import tuned_configs
from kernelbench.cli import main
from kernelbench.decoder import decode_bench as db
from kernelbench.decoder.trials import parse_trial

DEFAULT = {"BLOCK": 4, "num_warps": 4}


def test_parse_trial_reads_ops_filters_and_configs():
    t = parse_trial('moe_routed@T=16,64={"GLUE": "v4"}; fp8_linear@N=256@K=4096={"SPLIT": 8}')
    a, b = t.pins
    assert (a.op, a.config, a.where) == ("moe_routed", {"GLUE": "v4"}, (("T", frozenset({"16", "64"})),))
    assert (b.op, b.config) == ("fp8_linear", {"SPLIT": 8})
    assert b.where == (("K", frozenset({"4096"})), ("N", frozenset({"256"})))
    assert parse_trial('rms_norm={"num_warps": 2}').pins[0].where == ()      # no filter: every key


@pytest.mark.parametrize("text, problem", [
    ('moe_routed', "expected OP"),
    ('={"BM": 16}', "expected OP"),
    ('nosuchop={"BM": 16}', "unknown op 'nosuchop'"),
    ('fp8_linear@N={"BM": 16}', "a filter is not KEY=V"),
    ('fp8_linear={"BM": 16,}', "not JSON"),
    ('fp8_linear={"BM": 16, "NOPE": 1}', "unknown key 'NOPE'"),
    ('fp8_linear={"BM": 0}', "must be positive"),
    (' ; ', "no config given"),
    ('KERNELBENCH_KV_LANE_FORK=sideways', "must be one of front, after"),
    ('KERNELBENCH_TUNED=x.json', "not a setting a trial can change"),
    ('KERNELBENCH_PDL', "expected KERNELBENCH_PDL=VALUE"),
    ('KERNELBENCH_PDL=0; KERNELBENCH_PDL=1', "named twice"),
    ('KERNELBENCH_STREAM_PRIORITY=main,nope', "unknown stream kind"),
])
def test_parse_trial_names_what_is_wrong(text, problem):
    with pytest.raises(ValueError, match=problem):
        parse_trial(text, known_ops={"fp8_linear", "moe_routed"}, known_keys=lambda op: {"BM", "BN", "SPLIT"})


def test_pins_answer_only_their_keys_first_and_only_inside_the_block(monkeypatch):
    """A trial's pin answers its op's lookups whose key passes its filters (source "trial", merged over the
    default), before KERNELBENCH_PIN_CONFIG; the inner block's pins first; nothing is left once the blocks end."""
    monkeypatch.setenv("KERNELBENCH_PIN_CONFIG", 'opx={"BLOCK": 2}')
    outer = parse_trial('opx@M=1,16={"BLOCK": 8}').pins
    inner = parse_trial('opx@M=16={"BLOCK": 32}').pins
    with tuned_configs.pins_applied(outer):
        r = tuned_configs.resolve("opx", {"M": 1, "N": 7}, DEFAULT)
        assert (r.source, r.config) == ("trial", {"BLOCK": 8, "num_warps": 4})
        assert tuned_configs.resolve("opx", {"M": 64}, DEFAULT).source == "pinned"   # the filter excludes M = 64
        assert tuned_configs.resolve("opx", {"N": 1}, DEFAULT).source == "pinned"    # a key without M: excluded
        assert tuned_configs.resolve("opy", {"M": 1}, DEFAULT).source == "default"
        with tuned_configs.pins_applied(inner):
            assert tuned_configs.resolve("opx", {"M": 16}, DEFAULT).config["BLOCK"] == 32
            assert tuned_configs.resolve("opx", {"M": 1}, DEFAULT).config["BLOCK"] == 8
        assert tuned_configs.resolve("opx", {"M": 16}, DEFAULT).config["BLOCK"] == 8
    assert tuned_configs.resolve("opx", {"M": 1}, DEFAULT).source == "pinned"


def test_a_trial_pin_goes_over_the_tuned_entry_and_an_exported_entry_over_the_default(tmp_path, monkeypatch):
    """--try's pins change only the keys they name in the config the lookup finds without them (a tuned entry here:
    its tile stays, the resolution still names the entry); --try-entries' complete configs go over the default, as
    exported; an empty pin is the default at its keys (session 24's spelling of a per-key ablation); a pin of another
    key falls through to the entry; Pin refuses an unknown base. (Until session 36 every pin went over the default,
    which at a tuned key also dropped the entry's tile.)"""
    from kernelbench.decoder.trials import trials_from_entries
    tuned = tmp_path / "tuned.json"
    entry = {"device": "cpu", "op": "opx", "key": {"M": 1}, "config": {"BLOCK": 16, "num_warps": 8}, "us": 3.0}
    tuned.write_text(json.dumps({"version": 1, "entries": [entry]}))
    monkeypatch.setenv("KERNELBENCH_TUNED", str(tuned))
    monkeypatch.delenv("KERNELBENCH_PIN_CONFIG", raising=False)
    assert tuned_configs.resolve("opx", {"M": 1}, DEFAULT, "cpu").config == {"BLOCK": 16, "num_warps": 8}
    with tuned_configs.pins_applied(parse_trial('opx={"num_warps": 2}').pins):
        r = tuned_configs.resolve("opx", {"M": 1}, DEFAULT, "cpu")
        assert (r.source, r.config, r.tuned_key, r.tuned_us) == ("trial", {"BLOCK": 16, "num_warps": 2}, {"M": 1}, 3.0)
        assert tuned_configs.resolve("opx", {"M": 2}, DEFAULT, "cpu").config == {"BLOCK": 16, "num_warps": 2}
    with tuned_configs.pins_applied(parse_trial('opx@M=1={"num_warps": 2}').pins):     # M = 2: the entry, nearest
        assert tuned_configs.resolve("opx", {"M": 2}, DEFAULT, "cpu").source == "nearest"
    exported = tmp_path / "export.json"
    exported.write_text(json.dumps({"version": 1, "entries": [{**entry, "config": {"num_warps": 2}}]}))
    trial, = trials_from_entries(exported)
    with tuned_configs.pins_applied(trial.pins):
        assert tuned_configs.resolve("opx", {"M": 1}, DEFAULT, "cpu").config == {"BLOCK": 4, "num_warps": 2}
    with tuned_configs.pins_applied(parse_trial('opx@M=1={}').pins):       # {}: the default here, not the entry
        assert tuned_configs.resolve("opx", {"M": 1}, DEFAULT, "cpu").config == DEFAULT
    with pytest.raises(ValueError, match="Pin.over='tuned'"):
        tuned_configs.Pin("opx", {}, (), "tuned")


class _Step:
    """A stand-in for a point's step: each run looks up `op`'s config at `key` (as a kernel launch does) and logs
    its BLOCK; `refuse`: a BLOCK the 'kernel' rejects with a ValueError."""

    def __init__(self, op="opx", key=None, refuse=None):
        self.op, self.key, self.refuse, self.log = op, key or {"M": 1}, refuse, []

    def eager(self):
        block = tuned_configs.lookup(self.op, self.key, DEFAULT)["BLOCK"]
        if block == self.refuse:
            raise ValueError(f"opx: config BLOCK={block}: too big\nmore")
        self.log.append(block)

    def advance(self):
        self.log.append("advance")

    def reset(self):
        self.log.append("reset")


def test_try_configs_alternates_the_step_and_the_trial_and_reports_each_trial(monkeypatch):
    """Eagerly: one untimed run of the trial (compiles its kernels), then the step (A) and the trial (B) in the order
    A B, B A, ... at the same positions; the trial's runs see its config, the step's the default. A refused config
    and a trial that matches no lookup are rows with nothing timed, and the run goes on."""
    monkeypatch.setenv("KERNELBENCH_QUIET_TUNING", "1")
    step = _Step(refuse=64)
    trials = [parse_trial('opx={"BLOCK": 8}'), parse_trial('opx={"BLOCK": 64}'), parse_trial('opx@M=2={"BLOCK": 8}')]
    timed, refused, unmatched = db.try_configs(step, step.eager, None, trials, 6, torch.device("cpu"))
    assert step.log[:2 + 18] == [8, "reset"] + [4, 8, "advance", 8, 4, "advance"] * 3
    assert step.log[20:] == [4]                   # the unmatched trial's first run: the default, then nothing timed
    assert (timed["pinned"], timed["method"], timed["pairs"]) == ({"opx": 1}, "eager", 6)
    assert timed["verdict"] in ("faster", "slower", "within noise")
    assert timed["delta_q1_ms"] <= timed["paired_delta_ms"] <= timed["delta_q3_ms"]
    assert refused["verdict"] == "refused: ValueError: opx: config BLOCK=64: too big" and "pairs" not in refused
    assert unmatched == {"trial": 'opx@M=2={"BLOCK": 8}', "pinned": {},
                         "verdict": "matched no lookup of the step: nothing timed"}
    assert tuned_configs.resolve("opx", {"M": 1}, DEFAULT).source == "default"        # no pin left behind


@pytest.mark.parametrize("gap, verdict", [(0.5, "faster"), (-0.5, "slower"), (0.0, "within noise")])
def test_try_configs_verdict_says_whether_the_trial_is_faster(monkeypatch, gap, verdict):
    """delta = step - trial per pair: a trial that is 0.5 ms quicker in every pair is "faster", with +0.5."""
    monkeypatch.setenv("KERNELBENCH_QUIET_TUNING", "1")
    base = [10.0 + 0.01 * (i % 3) for i in range(8)]
    monkeypatch.setattr(db, "time_interleaved", lambda a, b, adv, pairs, dev: (
        base, [t - gap + (0.001 * (-1) ** i if gap == 0 else 0) for i, t in enumerate(base)]))
    row, = db.try_configs(_Step(), lambda: None, None, [parse_trial('opx={"BLOCK": 8}')], 8, torch.device("cpu"))
    assert row["verdict"] == verdict and row["paired_delta_ms"] == pytest.approx(gap, abs=0.0011)
    assert row["step_ms"] == pytest.approx(10.01) and row["trial_ms"] == pytest.approx(10.01 - gap, abs=0.0011)


def test_try_configs_captures_the_trial_and_falls_back_to_eager(monkeypatch):
    """With a graph: the trial's step is captured inside its pins and its replays alternate with the step's; a
    capture that fails leaves both eager, said in `method`."""
    monkeypatch.setenv("KERNELBENCH_QUIET_TUNING", "1")
    step = _Step()
    trial = parse_trial('opx={"BLOCK": 8}')

    def capture(eager):
        eager()
        return lambda: step.log.append("replay B")
    row, = db.try_configs(step, lambda: step.log.append("replay A"), capture, [trial], 2, torch.device("cpu"))
    assert step.log == [8, "reset", "replay A", "replay B", "advance", "replay B", "replay A", "advance"]
    assert (row["method"], row["pinned"]) == ("graph replay", {"opx": 1})

    def failing(eager):
        raise RuntimeError("operation not permitted when stream is capturing\nmore")
    step.log.clear()
    row, = db.try_configs(step, lambda: step.log.append("replay A"), failing, [trial], 2, torch.device("cpu"))
    assert row["method"].startswith("eager (the trial's graph failed to capture: RuntimeError: operation not")
    assert step.log == [8, "reset", 4, 8, "advance", 8, 4, "advance"]


@pytest.mark.parametrize("verdict, ci, control_ci, expected", [
    ("faster", [0.03, 0.05], [-0.024, -0.003], "faster"),          # wholly above the floor, 0.024
    ("faster", [0.01, 0.02], [-0.024, -0.003], db.CONTROL_OVERLAP),  # a recapture may move it either way
    ("faster", [0.005, 0.02], [-0.01, 0.01], db.CONTROL_OVERLAP),  # above 0 but inside what a recapture does
    ("slower", [-0.024, -0.003], [-0.01, 0.01], db.CONTROL_OVERLAP),
    ("slower", [-0.05, -0.02], [-0.01, 0.01], "slower"),
    ("within noise", [-0.01, 0.02], [0.0, 0.001], "within noise"),
    ("faster", [0.01, 0.02], None, "faster"),                      # no control interval: the sign test stands
])
def test_controlled_verdict_needs_the_trial_to_clear_the_controls_floor(verdict, ci, control_ci, expected):
    assert db.controlled_verdict(verdict, ci, control_ci) == expected
    names = {"faster": "helps", "slower": "hurts"}                 # --ablate-tuned's words, the same rule
    assert db.controlled_verdict(names.get(verdict, verdict), ci, control_ci, ("helps", "hurts")) == \
        names.get(expected, expected)


def test_try_configs_with_control_times_an_aa_trial_first_and_judges_against_it(monkeypatch):
    """--try's control (`control_trial`): the step captured again with nothing pinned, timed against the step
    before the trials (its runs see the default), the first row; each trial keeps the sign test's verdict as
    raw_verdict, and its verdict is "faster" only when its interval clears the control's floor. Here the recapture
    alone is 0.02 ms slower in every pair, so a trial 0.01 ms faster is within that and one 0.2 ms faster is
    faster."""
    monkeypatch.setenv("KERNELBENCH_QUIET_TUNING", "1")
    base = [10.0 + 0.001 * i for i in range(8)]
    gaps = iter([-0.02, 0.01, 0.2])

    def timed(a, b, adv, pairs, dev):
        a(), b()
        gap = next(gaps)
        return base, [t - gap + 0.0005 * (-1) ** i for i, t in enumerate(base)]
    monkeypatch.setattr(db, "time_interleaved", timed)
    step = _Step()
    trials = [parse_trial('opx={"BLOCK": 8}'), parse_trial('opx={"BLOCK": 16}')]
    control = db.control_trial(step, step.eager, None, 8, torch.device("cpu"))
    rows = db.try_configs(step, step.eager, None, trials, 8, torch.device("cpu"), control=control)
    assert step.log == [4, "reset", 4, 4, 8, "reset", 4, 8, 16, "reset", 4, 16]
    assert rows[0] is control and control["control"] and control["trial"] == db.CONTROL_TRIAL
    assert control["pinned"] == {} and control["method"] == "eager"
    assert control["verdict"] == "A/A: slower" and control["paired_delta_ms"] == pytest.approx(-0.02, abs=1e-3)
    _, small, large = rows
    assert (small["raw_verdict"], small["verdict"]) == ("faster", db.CONTROL_OVERLAP)
    assert (large["raw_verdict"], large["verdict"]) == ("faster", "faster")
    assert db.try_configs(_Step(), lambda: None, None, [], 8, torch.device("cpu"), control=control) == []


def test_cli_rejects_a_malformed_trial_before_any_work():
    r = CliRunner().invoke(main, ["decode-bench", "--no-store", "--try", 'fp8_linear={"NOPE": 1}'])
    assert r.exit_code == 2 and "--try" in r.output and "unknown key 'NOPE'" in r.output
    r = CliRunner().invoke(main, ["decode-bench", "--no-store", "--try", "fp8_linear"])
    assert r.exit_code == 2 and "expected OP" in r.output
    r = CliRunner().invoke(main, ["decode-bench", "--no-store", "--try", "KERNELBENCH_KV_LANE_FORK=sideways"])
    assert r.exit_code == 2 and "must be one of front, after" in r.output


@pytest.mark.skipif(os.environ.get("TRITON_INTERPRET") != "1", reason="runs fp8_linear's kernel: TRITON_INTERPRET=1")
def test_cli_try_times_the_trial_in_the_step_and_stores_it(tmp_path, monkeypatch):
    """decode-bench --try on the CPU (fp8_linear in the interpreter): the trial pins fp8_linear's one key, the row
    is in the JSON, the table and the database; a trial on another key matches nothing."""
    monkeypatch.setenv("KERNELBENCH_QUIET_TUNING", "1")
    out, url = tmp_path / "d.json", f"sqlite:///{tmp_path / 'kb.sqlite'}"
    r = CliRunner().invoke(main, [
        "decode-bench", "--layers", "swa", "--batches", "1", "--steps", "1", "--warmup", "0", "--context", "8",
        "--impl", "reference", "--use", "fp8_linear=triton", "--try", 'fp8_linear@M=1={"BN": 32, "num_warps": 4}',
        "--try", 'fp8_linear@M=2={"BN": 32}', "--json", str(out), "--db", url])
    assert r.exit_code == 0, r.output
    pt, = json.loads(out.read_text())["points"]
    control, timed, unmatched = pt["trials"]
    assert control["control"] and control["trial"] == db.CONTROL_TRIAL and control["verdict"].startswith("A/A: too")
    assert (timed["pinned"], timed["method"], timed["pairs"]) == ({"fp8_linear": 1}, "eager", 1)
    assert timed["verdict"].startswith("too few pairs") and timed["step_ms"] > 0 and timed["trial_ms"] > 0
    assert unmatched["verdict"].startswith("matched no lookup")
    assert "configs tried in the step (--try)" in r.output
    from kernelbench.db.store import Store
    from kernelbench.harness.roofline import latest_bench
    row, = latest_bench(Store(url), ops=[db.DECODE_OP])
    assert [t["trial"] for t in row["extra"]["trials"]] == [db.CONTROL_TRIAL, timed["trial"], unmatched["trial"]]


@pytest.mark.gpu
def test_gpu_try_captures_each_trial(tmp_path):
    """On a GPU (the short Flash set at C = 1, graph replay): a valid MoE trial is captured and timed in 10 pairs; a
    config the kernel refuses is a row, not a crash; a trial of settings (the KV lane's fork, PDL off) is captured
    with them and timed too."""
    out = tmp_path / "d.json"
    r = CliRunner().invoke(main, [
        "decode-bench", "--device", "cuda", "--impl", "triton", "--graph", "on", "--layers", "short", "--batches", "1",
        "--steps", "10", "--no-store", "--json", str(out), "--try", 'moe_routed@T=1={"ROUTE_SORT": "slots"}',
        "--try", 'moe_routed={"GLUE": "v9"}', "--try", "KERNELBENCH_KV_LANE_FORK=after;KERNELBENCH_PDL=0"])
    assert r.exit_code == 0, r.output
    pt, = json.loads(out.read_text())["points"]
    control, timed, refused, settings = pt["trials"]
    assert (settings["settings"], settings["method"], settings["pairs"]) == (
        ["KERNELBENCH_KV_LANE_FORK", "KERNELBENCH_PDL"], "graph replay", 10)     # captured with its streams
    assert "KERNELBENCH_KV_LANE_FORK" not in os.environ and settings["trial_ms"] > 0
    assert control["control"] and control["method"] == "graph replay" and control["pairs"] == 10
    assert control["verdict"] in ("A/A: faster", "A/A: slower", "A/A: within noise")
    assert (timed["pinned"], timed["method"], timed["pairs"]) == ({"moe_routed": 1}, "graph replay", 10)
    assert timed["raw_verdict"] in ("faster", "slower", "within noise")
    assert timed["verdict"] in ("faster", "slower", "within noise", db.CONTROL_OVERLAP) and timed["trial_ms"] > 0
    lo, hi = timed["delta_ci_ms"]
    assert lo <= timed["paired_delta_ms"] <= hi
    assert refused["verdict"].startswith("refused: ValueError: moe_experts: config GLUE='v9'")


def test_try_entries_pins_each_entry_of_a_tuned_file_at_exactly_its_key(tmp_path):
    """--try-entries: one trial per entry, every key field a filter, spelled as a --try value that parses back to
    the same pins over the default (the entry's complete config, as exported); a file that is not a tuned-config
    file is an error naming it."""
    from kernelbench.decoder.trials import trials_from_entries
    path = tmp_path / "tuned.json"
    path.write_text(json.dumps({"version": 1, "entries": [
        {"device": "NVIDIA H200", "op": "opx", "key": {"M": 16, "N": 256}, "config": {"BLOCK": 8}, "us": 1.0},
        {"device": "NVIDIA H200", "op": "opx", "key": {"M": 64, "N": 256}, "config": {"BLOCK": 16}, "us": 2.0}]}))
    a, b = trials_from_entries(path)
    assert a.text == 'opx@M=16@N=256={"BLOCK": 8}' and parse_trial(a.text, over="default") == a
    with tuned_configs.pins_applied(a.pins + b.pins):
        assert tuned_configs.resolve("opx", {"M": 16, "N": 256}, DEFAULT).config["BLOCK"] == 8
        assert tuned_configs.resolve("opx", {"M": 64, "N": 256}, DEFAULT).config["BLOCK"] == 16
        assert tuned_configs.resolve("opx", {"M": 16, "N": 512}, DEFAULT).source == "default"
    path.write_text("[]")
    with pytest.raises(ValueError, match=r"--try-entries .*tuned.json: expected"):
        trials_from_entries(path)
    with pytest.raises(ValueError, match="no such file"):
        trials_from_entries(tmp_path / "none.json")
    r = CliRunner().invoke(main, ["decode-bench", "--no-store", "--try-entries", str(path)])
    assert r.exit_code == 2 and "--try-entries" in r.output


def _point(batch, rows):
    return db.BenchPoint(batch, 8.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, trials=rows)


def _row(text, verdict, delta=0.02):
    return {"trial": text, "pinned": {"opx": 1}, "method": "graph replay", "step_ms": 6.5, "trial_ms": 6.5 - delta,
            "paired_delta_ms": delta, "delta_q1_ms": delta, "delta_q3_ms": delta, "delta_ci_ms": [0.01, 0.03],
            "pairs": 20, "verdict": verdict}


def test_faster_entries_keeps_only_what_the_step_judged_faster_everywhere_it_ran(tmp_path):
    """--keep-faster: an entry is kept when its trial was timed and every timed verdict is "faster" (it gains a step
    record); within noise, slower at one C of two, or never timed: not kept, each said why."""
    from kernelbench.decoder.trials import faster_entries, trial_text
    entries = [{"device": "NVIDIA H200", "op": "opx", "key": {"M": m}, "config": {"BLOCK": 8}, "us": 1.0}
               for m in (1, 16, 64, 128)]
    path = tmp_path / "tuned.json"
    path.write_text(json.dumps({"version": 1, "entries": entries}))
    text = [trial_text("opx", e["key"], e["config"]) for e in entries]
    points = [_point(1, [_row(text[0], "faster"), _row(text[2], "faster")]),
              _point(16, [_row(text[1], "within noise", 0.0), _row(text[2], "slower", -0.02),
                          {"trial": text[3], "pinned": {}, "verdict": "matched no lookup of the step: nothing timed"}])]
    kept, lines = faster_entries(path, points, "kernelbench decode-bench --try-entries tuned.json")
    assert [e["key"] for e in kept] == [{"M": 1}]
    step = kept[0]["step"]
    assert step["command"] == "kernelbench decode-bench --try-entries tuned.json" and step["verdict"] == "faster"
    assert step["points"] == [{"C": 1, "step_ms": 6.5, "trial_ms": 6.48, "paired_delta_ms": 0.02, "pairs": 20,
                               "delta_ci_ms": [0.01, 0.03]}]
    assert lines == [f"kept {text[0]}: faster at C = 1", f"not kept {text[1]}: C = 16: within noise",
                     f"not kept {text[2]}: C = 1: faster, C = 16: slower",
                     f"not kept {text[3]}: not timed (matched no lookup)"]


def test_merge_entries_replaces_same_key_and_keeps_the_rest(tmp_path):
    from kernelbench.harness.tune import merge_entries
    path = tmp_path / "sub" / "tuned.json"
    a = {"device": "D", "op": "opx", "key": {"M": 1}, "config": {"BLOCK": 8}}
    b = {"device": "D", "op": "opx", "key": {"M": 16}, "config": {"BLOCK": 8}}
    merge_entries(path, [b, a])                                      # created; sorted by device, op, canonical key
    assert [e["key"]["M"] for e in json.loads(path.read_text())["entries"]] == [16, 1]      # '{"M":16}' < '{"M":1}'
    merge_entries(path, [{**a, "config": {"BLOCK": 32}}, {**a, "device": "E"}])
    got = json.loads(path.read_text())["entries"]
    assert [(e["device"], e["key"]["M"], e["config"]["BLOCK"]) for e in got] == [("D", 16, 8), ("D", 1, 32),
                                                                                  ("E", 1, 8)]
    path.write_text('{"version": 7, "entries": []}')
    with pytest.raises(ValueError, match="version 7"):
        merge_entries(path, [a])
    assert json.loads(path.read_text())["version"] == 7                      # nothing written


def test_cli_keep_faster_needs_try_entries():
    r = CliRunner().invoke(main, ["decode-bench", "--no-store", "--keep-faster", "out.json"])
    assert r.exit_code == 2 and "--keep-faster needs --try-entries" in r.output


@pytest.mark.skipif(os.environ.get("TRITON_INTERPRET") != "1", reason="runs fp8_linear's kernel: TRITON_INTERPRET=1")
def test_cli_keep_faster_merges_the_faster_entry(tmp_path, monkeypatch):
    """decode-bench --try-entries F --keep-faster OUT on the CPU (fp8_linear in the interpreter; the paired timing
    replaced by a trial that is 0.1 ms faster in every pair): the entry lands in OUT with its step record."""
    monkeypatch.setenv("KERNELBENCH_QUIET_TUNING", "1")
    calls = []

    def timed(a, b, adv, pairs, dev):   # the A/A control (first call) level, each trial 0.1 ms faster
        calls.append(pairs)
        gap = 0.0 if len(calls) == 1 else 0.1
        return [5.0 + 0.01 * i for i in range(pairs)], [5.0 - gap + 0.01 * i + 0.001 * (-1) ** i for i in range(pairs)]
    monkeypatch.setattr(db, "time_interleaved", timed)
    tried, out = tmp_path / "tried.json", tmp_path / "out.json"
    tried.write_text(json.dumps({"version": 1, "entries": [
        {"device": "cpu", "op": "fp8_linear", "key": {"M": 1, "N": 256, "K": 256}, "config": {"BN": 32}, "us": 1.0},
        {"device": "cpu", "op": "fp8_linear", "key": {"M": 2, "N": 256, "K": 256}, "config": {"BN": 32}, "us": 1.0}]}))
    r = CliRunner().invoke(main, [
        "decode-bench", "--layers", "swa", "--batches", "1", "--steps", "6", "--warmup", "0", "--context", "8",
        "--impl", "reference", "--use", "fp8_linear=triton", "--try-entries", str(tried), "--keep-faster", str(out),
        "--no-store"])
    assert r.exit_code == 0, r.output
    entry, = json.loads(out.read_text())["entries"]
    assert entry["key"] == {"M": 1, "N": 256, "K": 256} and entry["config"] == {"BN": 32}
    assert entry["step"]["points"][0]["C"] == 1 and entry["step"]["points"][0]["paired_delta_ms"] == 0.1
    assert "--keep-faster: 1 entries merged" in r.output and "not kept fp8_linear@M=2" in r.output
    assert len(calls) == 2                                           # the control, then the entry that matched


def test_parse_trial_reads_step_settings_beside_pins(monkeypatch):
    """A part KERNELBENCH_NAME=VALUE sets one of STEP_SETTINGS for the trial (checked as the code that reads it
    checks it, without changing the environment); it may stand alone or beside pins."""
    monkeypatch.delenv("KERNELBENCH_KV_LANE_FORK", raising=False)
    t = parse_trial("KERNELBENCH_STREAM_PRIORITY=main,lane; KERNELBENCH_KV_LANE_FORK=after")
    assert t.pins == () and t.env == (("KERNELBENCH_STREAM_PRIORITY", "main,lane"), ("KERNELBENCH_KV_LANE_FORK", "after"))
    t = parse_trial('KERNELBENCH_PDL=0;opx@M=1={"BLOCK": 8}')
    assert t.env == (("KERNELBENCH_PDL", "0"),) and t.pins[0].config == {"BLOCK": 8}
    assert "KERNELBENCH_KV_LANE_FORK" not in os.environ


class _Model:
    """A stand-in for the decoder: `env.lanes` as decode-bench builds it (CPU: no streams)."""

    def __init__(self, **lanes):
        from kernelbench.decoder.lanes import Lanes
        self.env = type("Env", (), {})()
        self.env.lanes = Lanes(torch.device("cpu"), **lanes)


def test_settings_applied_remakes_the_lanes_and_puts_everything_back(monkeypatch):
    """Inside the block: the variables set, the model's lanes made again with the same sites and the KV lane's reach
    kept (the trial names only the fork), the ops' side streams cleared when a priority is set; after it the lanes
    object, the streams and the environment as they were, also when the block raises."""
    from kernelbench.decoder.trials import settings_applied
    from kernelbench.kernels import common
    monkeypatch.delenv("KERNELBENCH_KV_LANE_FORK", raising=False)
    monkeypatch.setenv("KERNELBENCH_STREAM_PRIORITY", "main,lane,kv")
    monkeypatch.setattr(common, "_BESIDE_STREAMS", {0: "the op stream"})
    model = _Model(sites="attention", kv_lane=3)
    old = model.env.lanes
    env = parse_trial("KERNELBENCH_KV_LANE_FORK=after;KERNELBENCH_STREAM_PRIORITY=main,lane").env
    with pytest.raises(RuntimeError, match="inside"):
        with settings_applied(env, model):
            new = model.env.lanes
            assert new is not old and new.kv_fork == "after" and new.kv_after_front(1)
            assert (new.sites, new.kv_lane_max_t) == (old.sites, 3)
            assert os.environ["KERNELBENCH_KV_LANE_FORK"] == "after"
            assert os.environ["KERNELBENCH_STREAM_PRIORITY"] == "main,lane" and common._BESIDE_STREAMS == {}
            raise RuntimeError("inside")
    assert model.env.lanes is old and old.kv_fork == "front"
    assert "KERNELBENCH_KV_LANE_FORK" not in os.environ
    assert os.environ["KERNELBENCH_STREAM_PRIORITY"] == "main,lane,kv" and common._BESIDE_STREAMS == {0: "the op stream"}
    with settings_applied((), model):                       # no settings: nothing made again
        assert model.env.lanes is old


def test_try_configs_times_a_settings_trial_with_the_setting_only_in_its_runs(monkeypatch):
    """A trial that only sets a setting pins no lookup and is timed all the same; its runs see the setting (the
    lanes made again, the variable set), the step's runs do not; the row names the setting."""
    monkeypatch.setenv("KERNELBENCH_QUIET_TUNING", "1")
    monkeypatch.delenv("KERNELBENCH_KV_LANE_FORK", raising=False)

    class _LaneStep(_Step):
        model = _Model(sites="attention")

        def eager(self):
            self.log.append((self.model.env.lanes.kv_fork, os.environ.get("KERNELBENCH_KV_LANE_FORK")))
    step = _LaneStep()
    row, = db.try_configs(step, step.eager, None, [parse_trial("KERNELBENCH_KV_LANE_FORK=after")], 2,
                          torch.device("cpu"))
    a, b = ("front", None), ("after", "after")
    assert step.log == [b, "reset", a, b, "advance", b, a, "advance"]
    assert (row["pinned"], row["settings"], row["pairs"]) == ({}, ["KERNELBENCH_KV_LANE_FORK"], 2)
    assert step.model.env.lanes.kv_fork == "front" and "KERNELBENCH_KV_LANE_FORK" not in os.environ
