"""The path choice inside the `triton` implementations of fp8_linear, compressor_step and indexer_q (config key
PATH): each path is the earlier implementation's code, bit for bit (interpreter); the defaults follow the H200
measurements where nothing is tuned; the tuner tries every path; and the key the decoder passes to the tuned-config
lookup is the key `kernelbench tune` exports, so an exported choice is what the decoder runs."""
from __future__ import annotations

import json
import warnings

import pytest
import torch

from kernelbench import registry, tuned_configs
from kernelbench.harness import tune
from kernelbench.harness.inspector import capture

registry.load_builtin()


def _run(op: str, impl: str, params: dict, config: dict | None, seed: int = 0):
    """-> (every tensor the call wrote or returned, in order; the kernels it launched) on fresh inputs."""
    spec, fn = registry.get_op(op), registry.get_impl(op, impl)
    inputs = spec.make_inputs(params, torch.Generator().manual_seed(seed), "cpu", "normal")
    inputs = fn.prepared(inputs)
    out = fn.fn(**inputs, **({"config": config} if config is not None else {}))
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    written = [v for v in inputs.values() if isinstance(v, torch.Tensor)]
    inputs = fn.prepared(spec.make_inputs(params, torch.Generator().manual_seed(seed), "cpu", "normal"))
    with capture() as launches:
        fn.fn(**inputs, **({"config": config} if config is not None else {}))
    return outs + written, [launch.name.split(":")[1] for launch in launches]


def _same(a: list, b: list) -> bool:
    return len(a) == len(b) and all(x.dtype == y.dtype and x.shape == y.shape and
                                    torch.equal(x.view(torch.uint8) if x.dtype == torch.bool else x,
                                                y.view(torch.uint8) if y.dtype == torch.bool else y)
                                    for x, y in zip(a, b))


@pytest.mark.parametrize("op,params,path,old,old_cfg", [
    ("fp8_linear", {"M": 3, "N": 200, "K": 512}, "v1", "triton_v1", None),
    ("fp8_linear", {"M": 1, "N": 128, "K": 256}, "v1", "triton_v1", None),
    ("compressor_step", {"T": 3, "D": 256, "d": 128, "R": 64, "ratio": 4, "rotate": False, "ctx": 64,
                         "ragged": True}, "split", "triton_v2", None),
    ("indexer_q", {"T": 3, "Qr": 128, "Hi": 4, "R": 64, "ctx": 64, "ragged": True}, "split", "triton_v1",
     {"num_warps": 2}),
])
def test_each_path_is_the_earlier_implementation(op, params, path, old, old_cfg):
    """PATH = the earlier implementation's code: the same outputs and in-place writes bit for bit, the same launches
    (the earlier impl at its own default config, the `triton` one with that config and PATH)."""
    old_impl = registry.get_impl(op, old)
    base = old_impl.default_config(params) if old_cfg is None else {}
    cfg = {**registry.get_impl(op, "triton").default_config(params), **base, "PATH": path}
    if old_cfg is not None:
        cfg["EPI_WARPS"] = old_cfg["num_warps"]
    new_out, new_launches = _run(op, "triton", params, cfg)
    old_out, old_launches = _run(op, old, params, old_cfg if old_cfg is not None else base)
    assert _same(new_out, old_out)
    assert new_launches == old_launches


@pytest.mark.parametrize("op", ["fp8_linear", "compressor_step", "indexer_q"])
def test_unknown_path_is_a_clear_error(op):
    spec = registry.get_op(op)
    params = spec.shape_cases("tiny")[0]
    impl = registry.get_impl(op, "triton")
    inputs = impl.prepared(spec.make_inputs(params, torch.Generator().manual_seed(0), "cpu", "normal"))
    with pytest.raises(ValueError, match="PATH='nope' must be one of"):
        impl.fn(**inputs, config={**impl.default_config(params), "PATH": "nope"})


def test_defaults_follow_the_h200_measurements():
    """Where nothing is tuned: fp8_linear's v1 family at C=64 for K = 4096 only (v2 at C=1, C=16 and K <= 2048);
    compressor_step one launch at ratio 128, the split launches at ratio 4 (attention and indexer); indexer_q fused
    only at C=64 with 64 heads (docs/perf/linear.md "The path per shape")."""
    from kernelbench.kernels import compressor as KC, indexer as KI, linear as KL
    path = lambda c: c["PATH"]  # noqa: E731
    assert [path(KL.fp8_v2_default({"M": m, "N": 512, "K": 4096})) for m in (1, 16, 64)] == ["v2", "v2", "v1"]
    assert [path(KL.fp8_v2_default({"M": 64, "N": n, "K": k})) for n, k in ((4096, 1024), (4096, 2048), (4096, 4096))] \
        == ["v2", "v2", "v1"]
    assert KL.fp8_v2_default({"M": 64, "N": 512, "K": 4096}) == {**KL.fp8_default({"M": 64, "N": 512, "K": 4096}),
                                                               "PATH": "v1"}
    for t in (1, 16, 64):
        assert path(KC.step_default({"T": t, "D": 4096, "d": 512, "ratio": 128})) == "one"
        assert path(KC.step_default({"T": t, "D": 4096, "d": 512, "ratio": 4})) == "split"
        assert path(KC.step_default({"T": t, "D": 4096, "d": 128, "ratio": 4})) == "split"
    assert [path(KI.indexer_q_default({"T": t, "Hi": 8, "Qr": 1024})) for t in (1, 16, 64)] == ["split"] * 3
    assert [path(KI.indexer_q_default({"T": t, "Hi": 64, "Qr": 1024})) for t in (1, 16, 64)] \
        == ["split", "split", "fused"]
    # every default is a config of its own space (the tuner's default trial is a real point of the search)
    for op, params in (("fp8_linear", {"M": 64, "N": 512, "K": 4096}), ("fp8_linear", {"M": 1, "N": 512, "K": 4096}),
                       ("compressor_step", {"T": 1, "D": 4096, "d": 512, "ratio": 128}),
                       ("compressor_step", {"T": 64, "D": 4096, "d": 512, "ratio": 4}),
                       ("indexer_q", {"T": 1, "Hi": 8, "Qr": 1024}), ("indexer_q", {"T": 64, "Hi": 8, "Qr": 1024})):
        impl = registry.get_impl(op, "triton")
        assert impl.default_config(params) in impl.configs(params), (op, params)


@pytest.mark.parametrize("op", ["fp8_linear", "compressor_step", "indexer_q"])
def test_tuner_tries_every_path(op):
    """A sampled search (max_trials far below the space) still runs the default and a config of every other PATH."""
    impl = registry.get_impl(op, "triton")
    for params in registry.get_op(op).shape_cases("flash-tp8"):
        picked, left = tune.candidate_configs(impl, params, max_trials=2)
        paths = {c["PATH"] for c in impl.configs(params)}
        assert left > 0 and {c["PATH"] for c in picked} == paths and len(paths) == 2
        assert picked[0] == impl.default_config(params)


@pytest.fixture(scope="module")
def tiny_model():
    from kernelbench.config import TINY
    from kernelbench.decoder import checkpoint as ck
    from kernelbench.decoder.backend import Ops
    from kernelbench.decoder.model import Transformer
    from kernelbench.decoder.tp import TPContext
    return Transformer(TINY, ck.random_local_state(TINY, 0, 1, seed=0, device=torch.device("cpu")), Ops("triton"),
                       TPContext(rank=0, world=1, simulate=True), torch.device("cpu"))


def _decoder_lookups(model, batch: int) -> list[tuple[str, dict]]:
    """(op, key) of every tuned-config lookup of one decode step of the tiny model (Triton backend; kernels recorded,
    not run: the keys depend on shapes only)."""
    cache = model.new_cache(batch, 16)
    ids = torch.full((batch,), 5, dtype=torch.long)
    pos = torch.full((batch,), 11, dtype=torch.long)       # (p + 1) % 4 == 0: the ratio-4 compressors emit
    with tuned_configs.observe_lookups() as seen, capture():
        model.decode(ids, pos, torch.arange(batch), cache)
    return seen


@pytest.mark.parametrize("batch", [1, 3])
def test_the_decoder_asks_for_the_keys_tune_exports(batch, tiny_model, monkeypatch, tmp_path):
    """For each of the three ops, every key the decoder's lookups pass at batch C is a key `tune` exports when it
    tunes the op's tiny shape set at that C (tune observes the kernel's own lookup: Bench.key); and a tuned entry
    exported under that key is what the kernel's lookup returns (exact hit, no warning)."""
    seen = _decoder_lookups(tiny_model, batch)
    ops = ("fp8_linear", "compressor_step", "indexer_q")
    asked = {op: {json.dumps(k, sort_keys=True) for o, k in seen if o == op} for op in ops}
    assert all(asked.values()), asked
    for op in ops:
        spec, impl = registry.get_op(op), registry.get_impl(op, "triton")
        exported = {}
        for p in spec.shape_cases("tiny"):
            if spec.batch(p) == batch:
                inputs = impl.prepared(spec.make_inputs(p, torch.Generator().manual_seed(0), "cpu", "normal"))
                with tuned_configs.observe_lookups() as got, capture():     # as tune's Bench.key, launches recorded
                    impl.fn(**inputs)
                exported.update({json.dumps(k, sort_keys=True): p for o, k in got if o == op})
        assert asked[op] <= set(exported), (op, asked[op] - set(exported))
        # export a choice under one of those keys (another path than the default) and look it up as the kernel does
        key = json.loads(sorted(asked[op])[0])
        params = exported[json.dumps(key, sort_keys=True)]
        default = impl.default_config(params)
        other = next(c for c in impl.configs(params) if c["PATH"] != default["PATH"])
        res = tune.TuneResult(op, "triton", params, key, "cpu", [], other, 1.0)
        path = tune.export([res], tmp_path / f"{op}.json", command="test")
        monkeypatch.setenv(tuned_configs.ENV_FILE, str(path))
        tuned_configs.reload()
        with tuned_configs.observe_lookups():
            got = tuned_configs.lookup(op, key, default, device="cpu")
        assert got == {**default, **other} and got["PATH"] == other["PATH"]
        monkeypatch.delenv(tuned_configs.ENV_FILE)
        tuned_configs.reload()


@pytest.mark.parametrize("op", ["fp8_linear", "compressor_step", "indexer_q"])
def test_shipped_tuned_entries_are_keys_the_kernels_ask_for(op):
    """Every entry of the packaged table for the op sits under the key its kernel passes to lookup at a flash-tp8
    case (observed on CPU, launches recorded: tune's Bench.key), and a lookup on that device returns it exactly."""
    entries = [e for e in tuned_configs.entries() if e["op"] == op]
    if not entries:
        pytest.skip(f"no tuned entries for {op} in kernelbench/tuned/v1.json")
    spec, impl = registry.get_op(op), registry.get_impl(op, "triton")
    asked = {}
    for p in spec.shape_cases("flash-tp8"):
        inputs = impl.prepared(spec.make_inputs(p, torch.Generator().manual_seed(0), "cpu", "normal"))
        with tuned_configs.observe_lookups() as got, capture():
            impl.fn(**inputs)
        asked.update({json.dumps(k, sort_keys=True): p for o, k in got if o == op})
    for e in entries:
        assert json.dumps(e["key"], sort_keys=True) in asked, (op, e["key"])
        p = asked[json.dumps(e["key"], sort_keys=True)]
        got = tuned_configs.lookup(op, e["key"], impl.default_config(p), device=e["device"])
        assert got == {**impl.default_config(p), **e["config"]}
        assert tuned_configs.config_problem(e["config"]) is None


def test_verify_covers_every_path_and_export_refuses_an_unreadable_config(tmp_path):
    """verify's config paths cover each PATH value and the MMA tiles' X_OPERAND (an option of the spaces above one
    row: the union of the tiny cases' spaces), so a tuned choice of any of them can pass the export's verify check;
    a config the tuned-config reader would reject (SPLIT 0) is never written."""
    from kernelbench.harness.verify_paths import path_key, select_paths
    for op in ("fp8_linear", "compressor_step", "indexer_q"):
        impl = registry.get_impl(op, "triton")
        keys = [path_key(impl, p.config or impl.default_config(registry.get_op(op).shape_cases("tiny")[0]))
                for p in select_paths(impl)]
        assert {k["PATH"] for k in keys} == {c["PATH"] for c in impl.configs({})}, (op, keys)
    fp8 = [p.config for p in select_paths(registry.get_impl("fp8_linear", "triton"))[1:]]
    assert any(c.get("X_OPERAND") == "A" for c in fp8)
    bad = tune.TuneResult("compressor_step", "triton", {}, {"T": 1}, "cpu", [], {"SPLIT": 0, "BLOCK_N": 64}, 1.0)
    with pytest.raises(ValueError, match="SPLIT=0: must be positive"):
        tune.export([bad], tmp_path / "t.json")
    assert not (tmp_path / "t.json").exists()
    from kernelbench.tuned_configs import config_problem       # a token threshold may be 0 ("never"), no lower
    assert config_problem({"EMIT_MAX_T": 0, "BLOCK_N": 64}) is None
    assert "EMIT_MAX_T=-1: must be positive" in config_problem({"EMIT_MAX_T": -1})
    # the indexer top-k's ROW_REGS 0 (the radix select: a config of its space) can be pinned, tried and exported
    assert config_problem({"ROW_REGS": 0, "SCAN": 4096}) is None
    assert "ROW_REGS=-1: must be positive" in config_problem({"ROW_REGS": -1})
    assert config_problem({"SEARCH_WINDOW": 0, "ROW_TAIL": False}) is None      # its search over every key half
    assert "SEARCH_WINDOW=-2: must be positive" in config_problem({"SEARCH_WINDOW": -2})
    assert "SCAN=0: must be positive" in config_problem({"SCAN": 0})


def test_combine_column_blocks_are_a_path_of_their_own():
    """sparse attention's COMBINE_COLS takes another branch of the combine kernel (blocks of a head's columns): its
    path key differs from the whole-head combine's whatever the width, so a tuned export with it needs its own
    passing verification; and verify runs such a config (the packaged H200 entry at one token has one)."""
    from kernelbench.harness.verify_paths import path_key, select_paths
    impl = registry.get_impl("sparse_attention", "triton")
    p = {"T": 1, "Hl": 8, "Dh": 512}
    whole = path_key(impl, impl.default_config(p), p)
    blocks = {dc: path_key(impl, {**impl.default_config(p), "COMBINE_COLS": dc}, p) for dc in (64, 256)}
    assert blocks[64] == blocks[256] != whole
    assert any((q.config or {}).get("COMBINE_COLS") for q in select_paths(impl))


def test_compressor_never_borrows_a_tuned_path_across_the_ratio():
    """The packaged H200 entries are mostly ratio-4 choices (split, or at T = 1 the two-launch path); a ratio-128 key
    without an entry of its own keeps its default (one launch) instead of borrowing the nearest ratio-4 entry
    (session 5: 24.46 us borrowed vs 17.39 for the one launch), and one with an exact entry (T = 64 since session
    22) runs that entry."""
    from kernelbench import tuned_configs
    from kernelbench.kernels import compressor as KC
    h200 = [e for e in tuned_configs.entries() if e["op"] == "compressor_step" and e["device"] == "NVIDIA H200"]
    own = {e["key"]["T"]: e["config"] for e in h200 if e["key"]["ratio"] == 128 and e["key"]["d"] == 512}
    assert {1, 16} - set(own), "the premise: some ratio-128 keys have no entry of their own"
    for t in (1, 16, 64):
        key = {"T": t, "D": 4096, "d": 512, "ratio": 128}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            got = tuned_configs.lookup("compressor_step", key, KC.step_default(key), device="NVIDIA H200",
                                       exact=KC.STEP_EXACT_KEYS)
            without = tuned_configs.lookup("compressor_step", key, KC.step_default(key), device="NVIDIA H200")
        if t in own:
            assert got == {**KC.step_default(key), **own[t]}, (t, got)
            continue
        assert got == KC.step_default(key) and got["PATH"] == "one", (t, got)
        ratio4 = [e["config"] for e in h200 if e["key"]["T"] == t and e["key"]["d"] == 512 and e["key"]["ratio"] == 4]
        assert without != got and without in ratio4, "without `exact` the nearest ratio-4 entry would be borrowed"


def test_every_config_a_space_offers_can_be_a_tuned_entry():
    """Whatever the tuner picks from an implementation's space (or its default) must pass the checks the
    tuned-config file is read with (config_problem with the op's known keys, as check_settings reads it at startup):
    on the H200 (2026-12-02) every mhc_post_pre_norm choice was refused at export because RELOAD / SIMT are
    true / false switches, so the op could not be tuned at all."""
    from kernelbench.usage import config_keys
    registry.load_builtin()
    checked = 0
    for spec in registry.ops():
        keys = config_keys(spec.name)
        for impl in registry.impls(spec.name).values():
            if impl.configs is None:
                continue
            for p in spec.shape_cases("flash-tp8"):
                space = impl.configs(p) + ([impl.default_config(p)] if impl.default_config else [])
                for cfg in space:
                    problem = tuned_configs.config_problem(cfg, keys)
                    assert problem is None, (spec.name, impl.name, p, cfg, problem)
                    checked += 1
    assert checked > 1000


def test_explicit_only_config_keys_can_be_pinned(monkeypatch):
    """A pin of what the decoder runs must be accepted: moe_experts with the shared expert fused (rank 0) defaults to
    MAXNREG_DOWN above 8 tokens, a key its space and shared-less default never show; the H200 call of 2026-12-02
    (session 9, call 5) refused such a pin as an unknown key. Impl.options declares the explicit-only keys; a typo
    is still refused."""
    import json
    from kernelbench.kernels import moe as KM
    from kernelbench.usage import config_keys
    registry.load_builtin()
    for op in ("moe_experts", "moe_layer"):
        keys = config_keys(op)
        for T in (1, 16, 64):
            cfg = KM.grouped_default({"T": T, "shared": True})
            assert tuned_configs.config_problem(cfg, keys) is None, (op, T, cfg)
        assert "MAXNREG_DOWN" in keys and "X_ONCE" in keys
        assert "unknown key 'MAXNREG_DOWNN'" in tuned_configs.config_problem({"MAXNREG_DOWNN": 80}, keys)
    pinned = KM.grouped_default({"T": 64, "shared": True})
    monkeypatch.setenv(tuned_configs.ENV_PIN, f"moe_experts={json.dumps(pinned)}")
    tuned_configs.check_settings(known_ops={s.name for s in registry.ops()}, known_keys=config_keys)
    monkeypatch.setenv(tuned_configs.ENV_PIN, 'moe_experts={"MAXNREG_DOWNN": 80}')
    with pytest.raises(tuned_configs.TuningError, match="unknown key"):
        tuned_configs.check_settings(known_ops={s.name for s in registry.ops()}, known_keys=config_keys)
