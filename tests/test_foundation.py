"""Config, registry, backend and tuned-config lookup: the pieces every other module leans on."""
import json
import warnings

import pytest
import torch

from kernelbench import registry, tuned_configs
from kernelbench.decoder.backend import Ops
from kernelbench.config import CONFIGS, FLASH, PRO, TINY, ModelConfig, divide, get_config, get_shape_set
from kernelbench.registry import Cost, OpSpec, Tolerance


def test_configs_match_spec_table():
    assert (FLASH.dim, FLASH.n_heads, FLASH.n_routed_experts, FLASH.index_topk) == (4096, 64, 256, 512)
    assert (PRO.dim, PRO.n_heads, PRO.n_routed_experts, PRO.index_topk) == (7168, 128, 384, 1024)
    # Flash: layers 0-1 SWA, then 21 x ratio 4 and 20 x ratio 128, then the MTP layer (ratio 0)
    r = FLASH.compress_ratios
    assert r[:2] == (0, 0) and r[-1] == 0 and r[2:-1].count(4) == 21 and r[2:-1].count(128) == 20
    # Pro: 30 x 4 and 31 x 128 in all
    assert PRO.compress_ratios[:-1].count(4) == 30 and PRO.compress_ratios[:-1].count(128) == 31
    assert {TINY.layer_kind(i) for i in range(TINY.n_layers)} == {"swa", "csa", "hca"}
    assert TINY.n_hash_layers >= 1 and TINY.n_mtp_layers == 1


def test_hf_round_trip():
    for cfg in CONFIGS.values():
        assert ModelConfig.from_hf(cfg.to_hf(), name=cfg.name) == cfg


def test_bad_configs_are_rejected():
    with pytest.raises(ValueError, match="compress_ratios"):
        TINY.replace(compress_ratios=(0, 4))
    with pytest.raises(ValueError, match="multiple of the FP8 block"):
        TINY.replace(dim=200)
    with pytest.raises(ValueError, match="missing keys"):
        ModelConfig.from_hf({"hidden_size": 8})
    with pytest.raises(ValueError, match="not divisible by TP=3"):
        FLASH.check_tp(3)
    with pytest.raises(ValueError, match="unknown configuration"):
        get_config("nope")
    with pytest.raises(ValueError, match="unknown shape set"):
        get_shape_set("nope")
    assert divide(64, 8) == 8
    with pytest.raises(ValueError):
        divide(10, 4)


def _toy_spec(name):
    return OpSpec(
        name=name, family="toy", reference=lambda x: x * 2,
        make_inputs=lambda p, g, d, v: {"x": torch.randn(p["N"], generator=g).to(d)},
        cases=lambda ss: [{"N": 4}], strategy=lambda: None, cost=lambda p: Cost(p["N"], 8 * p["N"]),
        tolerance=lambda p: {"y": Tolerance(exact=True)}, outputs=("y",))


def test_registry_and_backend_resolution():
    spec = registry.register_op(_toy_spec("toy_double"))
    try:
        registry.register_impl("toy_double", "triton")(lambda x, config=None: x + x)
        assert set(registry.impls("toy_double")) == {"reference", "triton"}
        with pytest.raises(registry.RegistryError, match="registered twice"):
            registry.register_impl("toy_double", "triton")(lambda x: x)
        ops = Ops("triton")
        x = torch.arange(4.0)
        assert torch.equal(ops.toy_double(x=x), 2 * x) and "toy_double" not in ops.fallbacks
        registry.unregister_impl("toy_double", "triton")
        ops = Ops("triton")
        assert torch.equal(ops.toy_double(x=x), 2 * x) and "toy_double" in ops.fallbacks
        assert spec.cost({"N": 4}).intensity == 0.125
        with pytest.raises(registry.RegistryError, match="unknown op"):
            registry.get_op("no_such_op")
        with pytest.raises(registry.RegistryError, match="has no implementation"):
            registry.get_impl("toy_double", "cuda-magic")
    finally:
        registry._OPS.pop("toy_double", None)
        registry._IMPLS.pop("toy_double", None)


def test_every_decode_op_names_its_batch():
    """--batch (bench, tune, verify) selects an op's cases by its batch key: every op whose Flash TP8 cases vary with
    the decode batch C declares which parameter C is (attention_front / attention_q / rope did not: `tune
    attention_front --batch 1` tuned every M). Prefill ops (compressor_prefill: S tokens of one sequence) have none."""
    from kernelbench.config import get_shape_set
    from kernelbench.harness.bench import select_cases
    registry.load_builtin()
    batches = get_shape_set("flash-tp8").batches
    for spec in registry.ops():
        if not spec.make_inputs.__module__.startswith("kernelbench.ops."):
            continue                                  # another test's toy op (kb_toy.py) in this worker's registry
        cases = spec.shape_cases(get_shape_set("flash-tp8"))
        if spec.batch_key is None:
            assert spec.name == "compressor_prefill", spec.name
            continue
        assert {spec.batch(p) for p in cases} >= set(batches), spec.name     # (fp4 quant: rows of C x heads too)
        one = select_cases(spec, ("flash-tp8",), (batches[0],), ())
        assert one and all(spec.batch(p) == batches[0] for p in one), spec.name


def test_packed_impls_count_the_bytes_of_their_form():
    """An impl that reads a packed storage form (its prepare packs the cache) names a form its op declares, and that
    form's cost is what bench counts for it: the same work, fewer bytes at every Flash case (the FP4 key cache 68 bytes
    a key instead of 256, the FP8 attention cache 584 an entry instead of 1024). An undeclared form is an error by
    name."""
    registry.load_builtin()
    named = [(spec, impl) for spec in registry.ops() for impl in registry.impls(spec.name).values()
             if impl.form is not None]
    assert {(s.name, i.name) for s, i in named} >= {("sparse_attention", "triton_fp8kv"),
                                                      ("indexer_topk", "triton_fp4keys"),
                                                      ("csa_indices", "triton_fp4keys")}
    for spec, impl in named:
        assert impl.prepare is not None, (spec.name, impl.name)
        for p in spec.shape_cases("flash-tp8-long"):
            full, packed = spec.cost(p), spec.form_cost(impl.form, p)
            assert packed.flops == full.flops and packed.bytes < full.bytes, (spec.name, p)
    spec = registry.get_op("csa_indices")
    p = next(c for c in spec.shape_cases("flash-tp8-long") if c["ctx"] == 65536 and c["T"] == 1)
    keys = p["ctx"] // 4                                              # position ctx - 1: (p + 1) // 4 keys
    saved = spec.cost(p).bytes - spec.form_cost("fp4keys", p).bytes
    assert saved == pytest.approx(keys * (256 - 68), rel=1e-3)
    with pytest.raises(registry.RegistryError, match="no packed form 'fp8kv'.*fp4keys"):
        spec.form_cost("fp8kv", p)


def test_every_lookup_is_recorded_with_where_its_config_came_from(tmp_path, monkeypatch):
    f = tmp_path / "tuned.json"
    f.write_text(json.dumps({"version": 1, "entries": [
        {"device": "GPU-A", "op": "opx", "key": {"M": 16, "N": 1024}, "config": {"BLOCK": 64}, "us": 3.5},
        {"device": "GPU-B", "op": "opx", "key": {"M": 1, "N": 1024}, "config": {"BLOCK": 32}, "us": 1.25},
    ]}))
    monkeypatch.setenv(tuned_configs.ENV_FILE, str(f))
    monkeypatch.setenv("KERNELBENCH_QUIET_TUNING", "1")
    default = {"BLOCK": 16}
    with tuned_configs.record_resolutions() as seen:
        for _ in range(2):          # a step asks once per layer: summarize keeps one row per distinct lookup
            tuned_configs.lookup("opx", {"M": 16, "N": 1024}, default, device="GPU-A")
        tuned_configs.lookup("opx", {"M": 64, "N": 1024}, default, device="GPU-A")
        tuned_configs.lookup("opx", {"M": 2, "N": 1024}, default, device="GPU-C")
        tuned_configs.lookup("opx", {"M": 64, "N": 2048}, default, device="GPU-A", exact=("N",))
    tuned_configs.lookup("opx", {"M": 4, "N": 1024}, default, device="GPU-A")      # outside the block: not seen
    rows = [r.as_json() for r in tuned_configs.summarize(seen)]
    assert len(seen) == 5 and [(r["source"], r["config"]["BLOCK"], r["tuned_key"], r["tuned_us"]) for r in rows] == [
        ("exact", 64, {"M": 16, "N": 1024}, 3.5), ("nearest", 64, {"M": 16, "N": 1024}, 3.5),
        ("other device", 32, {"M": 1, "N": 1024}, 1.25), ("default", 16, None, None)]
    assert rows[2]["tuned_device"] == "GPU-B" and rows[0]["key"] == {"M": 16, "N": 1024}
    monkeypatch.setenv(tuned_configs.ENV_PIN, 'opx={"BLOCK": 256}')
    r = tuned_configs.resolve("opx", {"M": 16, "N": 1024}, default, device="GPU-A")
    assert (r.source, r.config) == ("pinned", {"BLOCK": 256})


def test_a_one_row_gemv_never_borrows_a_tile_tuned_at_more_rows(tmp_path, monkeypatch):
    """H200, session 21: attention_front tuned at M = 16 only (a BM 16 tile); at M = 1 the lookup borrowed it over
    the GEMV default (BM 1) and the C = 1 step got 3% slower. Borrowing keeps the default's side of BM = 1; an
    exact entry is the tuner's own measurement at that key and still wins; a tile default still borrows a tile."""
    f = tmp_path / "tuned.json"
    f.write_text(json.dumps({"version": 1, "entries": [
        {"device": "GPU-A", "op": "opx", "key": {"M": 16, "N": 1024}, "config": {"BM": 16, "SPLIT": 8}},
        {"device": "GPU-A", "op": "opx", "key": {"M": 64, "N": 512}, "config": {"BM": 1, "SPLIT": 2}},
        {"device": "GPU-B", "op": "opx", "key": {"M": 2, "N": 1024}, "config": {"BM": 16, "SPLIT": 4}},
    ]}))
    monkeypatch.setenv(tuned_configs.ENV_FILE, str(f))
    monkeypatch.setenv("KERNELBENCH_QUIET_TUNING", "1")
    gemv = {"BM": 1, "NB": 2, "SPLIT": 16}
    tile = {"BM": 16, "SPLIT": 16}
    r = tuned_configs.resolve("opx", {"M": 1, "N": 1024}, gemv, device="GPU-A")
    assert (r.source, r.config) == ("nearest", {"BM": 1, "NB": 2, "SPLIT": 2}), r     # the GEMV entry, farther off
    r = tuned_configs.resolve("opx", {"M": 1, "N": 2048}, gemv, device="GPU-C")      # other devices: the same rule
    assert (r.source, r.tuned_key) == ("other device", {"M": 64, "N": 512}), r
    f.write_text(json.dumps({"version": 1, "entries": [
        {"device": "GPU-A", "op": "opx", "key": {"M": 16, "N": 1024}, "config": {"BM": 16, "SPLIT": 8}}]}))
    tuned_configs.reload()
    assert tuned_configs.resolve("opx", {"M": 1, "N": 1024}, gemv, device="GPU-A").source == "default"
    assert tuned_configs.resolve("opx", {"M": 1, "N": 1024}, tile, device="GPU-A").config == {"BM": 16, "SPLIT": 8}
    r = tuned_configs.resolve("opx", {"M": 16, "N": 1024}, gemv, device="GPU-A")     # exact: the tuner chose it here
    assert (r.source, r.config["BM"]) == ("exact", 16)
    assert tuned_configs.same_family({"BM": 1}, {"BM": 1, "X": 3}) and not tuned_configs.same_family({"BM": 1},
                                                                                                    {"BM": 32})
    tuned_configs.reload()


def test_a_registered_op_never_borrows_across_its_batch(tmp_path, monkeypatch):
    """fp8_linear's batch is M: at M = 64 the lookup takes an entry tuned at M = 64 (another N) over a nearer one
    tuned at M = 16, and with none at M = 64 it keeps the default (H200, session 21 call 3: attention_front at M = 16
    borrowing M = 64's split made the C = 16 step 1.3% slower). An unregistered op has no batch field."""
    f = tmp_path / "tuned.json"
    entries = [{"device": "GPU-A", "op": "fp8_linear", "key": {"M": 16, "N": 256, "K": 4096}, "config": {"SPLIT": 32}},
               {"device": "GPU-A", "op": "fp8_linear", "key": {"M": 64, "N": 4096, "K": 4096}, "config": {"SPLIT": 4}}]
    f.write_text(json.dumps({"version": 1, "entries": entries}))
    monkeypatch.setenv(tuned_configs.ENV_FILE, str(f))
    tuned_configs.reload()
    assert tuned_configs.batch_field("fp8_linear", {"M": 64, "N": 256, "K": 4096}) == ("M",)
    assert tuned_configs.batch_field("opx", {"M": 64}) == ()
    r = tuned_configs.resolve("fp8_linear", {"M": 64, "N": 256, "K": 4096}, {"SPLIT": 1}, device="GPU-A")
    assert (r.source, r.tuned_key) == ("nearest", {"M": 64, "N": 4096, "K": 4096}), r
    r = tuned_configs.resolve("fp8_linear", {"M": 32, "N": 256, "K": 4096}, {"SPLIT": 1}, device="GPU-A")
    assert (r.source, r.config) == ("default", {"SPLIT": 1}), r
    r = tuned_configs.resolve("fp8_linear", {"M": 16, "N": 256, "K": 4096}, {"SPLIT": 1}, device="GPU-A")
    assert (r.source, r.config) == ("exact", {"SPLIT": 32}), r
    tuned_configs.reload()


def test_tuning_lookup_exact_nearest_default_and_corrupt(tmp_path, monkeypatch):
    f = tmp_path / "tuned.json"
    f.write_text(json.dumps({"version": 1, "entries": [
        {"device": "GPU-A", "op": "opx", "key": {"M": 16, "N": 1024}, "config": {"BLOCK": 64}},
        {"device": "GPU-A", "op": "opx", "key": {"M": 64, "N": 1024}, "config": {"BLOCK": 128}},
        {"device": "GPU-B", "op": "opx", "key": {"M": 1, "N": 1024}, "config": {"BLOCK": 32}},
    ]}))
    monkeypatch.setenv(tuned_configs.ENV_FILE, str(f))
    default = {"BLOCK": 16, "WARPS": 4}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert tuned_configs.lookup("opx", {"M": 16, "N": 1024}, default, device="GPU-A") == {"BLOCK": 64, "WARPS": 4}
    with pytest.warns(UserWarning, match="tuned for"):
        assert tuned_configs.lookup("opx", {"M": 48, "N": 1024}, default, device="GPU-A")["BLOCK"] == 128
    with pytest.warns(UserWarning, match="GPU-B"):
        assert tuned_configs.lookup("opx", {"M": 2, "N": 1024}, default, device="GPU-C")["BLOCK"] == 32
    with pytest.warns(UserWarning, match="no tuned config"):
        assert tuned_configs.lookup("opy", {"M": 2}, default, device="GPU-C") == default
    with pytest.warns(UserWarning, match="no tuned config"):    # N must match: nothing to borrow on any device
        assert tuned_configs.lookup("opx", {"M": 16, "N": 2048}, default, device="GPU-A", exact=("N",)) == default
    with warnings.catch_warnings():
        warnings.simplefilter("error")                        # an exact hit needs no warning, `exact` or not
        assert tuned_configs.lookup("opx", {"M": 64, "N": 1024}, default, device="GPU-A", exact=("N",))["BLOCK"] == 128
    monkeypatch.setenv(tuned_configs.ENV_PIN, 'opx={"BLOCK": 256}')
    assert tuned_configs.lookup("opx", {"M": 16, "N": 1024}, default, device="GPU-A")["BLOCK"] == 256
    monkeypatch.delenv(tuned_configs.ENV_PIN)
    bad = tmp_path / "bad.json"
    bad.write_text("{ not json")
    monkeypatch.setenv(tuned_configs.ENV_FILE, str(bad))     # a file the user named: an error, not a silent default
    with pytest.raises(tuned_configs.TuningError, match=f"KERNELBENCH_TUNED={bad}: unreadable"):
        tuned_configs.lookup("opz", {"M": 1}, default, device="GPU-A")
