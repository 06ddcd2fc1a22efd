"""Verification power (issue 18): every config path, format boundaries, semantic probes.

Each planted bug of tests/planted/{decode_path,boundary_scale,gate_clamp}.py is missed by the old
engine (default config only, no boundary mode, no probes: emulated by stripping them) and caught by the
default `verify_pair`."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from kernelbench import registry, tune
from kernelbench.db.store import Store
from kernelbench.verify import Options, verify_pair
from kernelbench.verify_paths import NOT_HERE, UnverifiedPath, select_paths
from kernelbench.verify_record import Recorder

PLANTED = Path(__file__).parent / "planted"


def _old_engine(spec, impl, examples=8):
    old_spec = dataclasses.replace(spec, value_modes=tuple(v for v in spec.value_modes if v != "boundary"), probes=())
    opts = Options(device="cpu", examples=examples, profile="ci", shrink_seconds=10, probes=False)
    return verify_pair(old_spec, dataclasses.replace(impl, configs=None), opts)


def _new_engine(spec, impl, examples=8):
    return verify_pair(spec, impl, Options(device="cpu", examples=examples, profile="ci", shrink_seconds=10))


@pytest.fixture
def planted():
    loaded = []

    def load(file, op, name):
        registry.load_module(str(PLANTED / file))
        loaded.append((op, name))
        return registry.get_op(op), registry.get_impl(op, name)
    yield load
    for op, name in loaded:
        registry.unregister_impl(op, name)


def test_bug_in_a_non_default_config_path(planted):
    spec, impl = planted("decode_path.py", "fp4_linear", "planted_decode")
    assert _old_engine(spec, impl, examples=3).failed == 0
    rep = _new_engine(spec, impl, examples=3)
    bad = [p for p in rep.paths if p.status == "FAIL"]
    assert [p.config["DECODE"] for p in bad] == ["fp8"], [(p.label, p.status) for p in rep.paths]
    f = rep.failures[-1]
    assert f.example.config["DECODE"] == "fp8" and "--config '{" in f.example.repro()


def test_boundary_only_quantization_bug(planted):
    spec, impl = planted("boundary_scale.py", "fp8_simulate", "planted_boundary")
    assert _old_engine(spec, impl, examples=12).failed == 0
    rep = _new_engine(spec, impl)
    assert rep.failed and rep.failures[-1].example.values == "boundary"


def test_small_semantic_violation(planted):
    spec, impl = planted("gate_clamp.py", "shared_expert", "planted_gate_clamp")
    assert _old_engine(spec, impl).failed == 0
    rep = _new_engine(spec, impl)
    f = rep.failures[0]
    assert f.example.values == "probe:swiglu_gate_below_limit" and f.example.source == "probe"
    assert "clamped above only" in f.failure


def test_paths_cover_every_categorical_value_and_mark_compiled_only():
    registry.load_builtin()
    moe = select_paths(registry.get_impl("moe_experts", "triton"))
    decodes = {(p.config or {}).get("DECODE", "default") for p in moe}
    assert {"bf16", "fp8_asm"} <= decodes
    asm = [p for p in moe if p.config and p.config.get("DECODE") == "fp8_asm"]
    assert asm and all("inline PTX" in p.compiled_only for p in asm)
    fp4 = select_paths(registry.get_impl("fp4_linear", "triton"))
    assert any(p.config and p.config.get("DECODE") == "fp8" for p in fp4)
    assert len(moe) <= 6 and len(fp4) <= 4, "a covering set, not the product"


def _toy_impl():
    """rms_norm in torch with a two-path config space, one of them compiled-only by name."""
    ref = registry.get_op("rms_norm").reference

    def fn(x, weight, eps, config=None):
        return ref(x, weight, eps)
    registry.register_impl("rms_norm", "toy_paths", replace=True, configs=lambda p: [{"MODE": "plain"},
                                                                                      {"MODE": "fast_asm"}],
                           default_config=lambda p: {"MODE": "plain"})(fn)
    return registry.get_op("rms_norm"), registry.get_impl("rms_norm", "toy_paths")


def test_compiled_only_path_is_not_verified_here_and_tune_export_refuses(tmp_path):
    spec, impl = _toy_impl()
    try:
        store = Store(f"sqlite:///{tmp_path}/kb.sqlite")
        res = tune.TuneResult("rms_norm", "toy_paths", {"M": 1, "N": 8}, {"M": 1, "N": 8}, "cpu", [],
                              {"MODE": "plain"}, 1.0)
        with pytest.raises(UnverifiedPath):
            tune.export([res], tmp_path / "v1.json", store=store)
        opts = Options(device="cpu", examples=2, profile="ci")
        rec = Recorder(store, opts)
        rep = verify_pair(spec, impl, opts, on_result=rec.result)
        rec.finish("passed")
        assert [(p.config, p.status) for p in rep.paths] == [({"MODE": "fast_asm"}, NOT_HERE)]
        tune.export([res], tmp_path / "v1.json", store=store)          # the default path passed on cpu
        asm = dataclasses.replace(res, chosen={"MODE": "fast_asm"})
        with pytest.raises(UnverifiedPath):
            tune.export([asm], tmp_path / "v1.json", store=store)
        store.dispose()
    finally:
        registry.unregister_impl("rms_norm", "toy_paths")
