"""`--where KEY=V[,V...]` on bench and tune: only the cases whose params match every filter. Used to tune exactly the
keys a decode step asks for (decode-bench's "configs not tuned at the key" table) without re-tuning the others."""
import pytest
from click.testing import CliRunner

from kernelbench import registry
from kernelbench.harness.bench import bench_work, describe_where, matches_where, parse_where, select_cases


def test_parse_where_merges_repeated_keys_and_rejects_malformed_items():
    assert parse_where(["M=16,64", "N=256", "M=1"]) == {"M": {"1", "16", "64"}, "N": {"256"}}
    assert parse_where([]) == {} and parse_where(None) == {}
    for bad in ("M", "=64", "M=", "M=,"):
        with pytest.raises(ValueError, match="KEY=VALUE"):
            parse_where([bad])
    assert describe_where(parse_where(["N=4096,256"])) == "--where N=256,4096"


def test_every_filter_must_match_and_a_missing_key_excludes():
    where = parse_where(["M=64", "kind=csa"])
    assert matches_where({"M": 64, "kind": "csa", "N": 1}, where)
    assert not matches_where({"M": 16, "kind": "csa"}, where)
    assert not matches_where({"M": 64}, where)                 # no 'kind': not a match
    assert matches_where({"M": 64}, None) and matches_where({"M": 64}, {})


def test_where_selects_the_decoders_shared_expert_slices_of_fp8_linear():
    """The step's shared expert runs a TP rank's slice (N = moe_inter_dim / 8 = 256 rows of W1, K = 256 of W2): those
    keys are fp8_linear cases of flash-tp8, so `tune fp8_linear --where N=256` reaches them."""
    registry.load_builtin()
    spec = registry.get_op("fp8_linear")
    picked = select_cases(spec, ("flash-tp8",), (), (), parse_where(["M=64", "N=256"]))
    assert picked == [{"M": 64, "N": 256, "K": 4096}]
    w2 = select_cases(spec, ("flash-tp8",), (16, 64), (), parse_where(["K=256"]))
    assert sorted(w2, key=lambda p: p["M"]) == [{"M": 16, "N": 4096, "K": 256}, {"M": 64, "N": 4096, "K": 256}]
    everything = select_cases(spec, ("flash-tp8",), (), ())
    assert len(everything) > len(picked) and picked[0] in everything


def test_bench_work_applies_the_filter_to_every_op():
    registry.load_builtin()
    work = bench_work(("bf16_linear", "fp8_linear"), ("triton",), ("flash-tp8",), (), (), parse_where(["N=256"]))
    assert work and {spec.name for spec, _, _ in work} == {"bf16_linear", "fp8_linear"}
    assert all(p["N"] == 256 for _, _, p in work)


def test_tune_command_refuses_a_filter_that_selects_nothing(tmp_path, monkeypatch):
    """A typo (lower-case m) names no case: the command says so and tunes nothing, instead of an empty run."""
    from kernelbench.cli import main
    monkeypatch.setenv("TRITON_INTERPRET", "1")     # --interpret's precondition; nothing runs a kernel here
    db = f"sqlite:///{tmp_path / 'kb.sqlite'}"
    r = CliRunner().invoke(main, ["tune", "fp8_linear", "--interpret", "--db", db, "--where", "m=64"])
    assert r.exit_code == 1 and "no case of fp8_linear matches --where m=64" in r.output, r.output
    r = CliRunner().invoke(main, ["tune", "fp8_linear", "--interpret", "--db", db, "--where", "M"])
    assert r.exit_code == 2 and "expected KEY=VALUE" in r.output, r.output


def test_decode_bench_turns_untuned_keys_into_tune_commands_that_select_exactly_them():
    """decode-bench's untuned-config table ends with the `kernelbench tune ... --where` that reaches each key: keys
    differing only in the batch share a command, and the command's filters select exactly those cases. A key whose
    fields are not case params (sparse attention's Ksel) or an unknown op gets none."""
    import shlex

    from kernelbench.decoder.decode_bench import tune_commands
    registry.load_builtin()
    looked = [{"op": "fp8_linear", "key": {"M": m, "N": 256, "K": 4096}} for m in (16, 64, 16)]
    looked += [{"op": "sparse_attention", "key": {"T": 1, "Hl": 8, "Ksel": 640}},
               {"op": "no_such_op", "key": {"M": 1}}]
    cmd, = tune_commands(looked)
    assert cmd == "kernelbench tune fp8_linear --shapes flash-tp8 --where M=16,64 --where N=256 --where K=4096"
    argv = shlex.split(cmd)
    where = parse_where([argv[i + 1] for i, a in enumerate(argv) if a == "--where"])
    picked = select_cases(registry.get_op("fp8_linear"), ("flash-tp8",), (), (), where)
    assert sorted(p["M"] for p in picked) == [16, 64] and all(p["N"] == 256 for p in picked)
