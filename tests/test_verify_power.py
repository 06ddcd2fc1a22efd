"""Verification power (issue 18): every config path, format boundaries, semantic probes.

Each planted bug of tests/planted/{decode_path,boundary_scale,gate_clamp}.py is missed by the old
engine (default config only, no boundary mode, no probes: emulated by stripping them) and caught by the
default `verify_pair`."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from kernelbench import registry
from kernelbench.harness import tune
from kernelbench.db.store import Store
from kernelbench.harness.verify import Options, verify_pair
from kernelbench.harness.verify_paths import NOT_HERE, UnverifiedPath, select_paths
from kernelbench.harness.verify_record import Recorder

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
    moe = select_paths(registry.get_impl("moe_experts", "triton_v1"))
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
        assert [(p.config, p.label, p.status) for p in rep.paths] == [({"MODE": "fast_asm"}, '{"MODE":"fast_asm"}',
                                                                       NOT_HERE), (None, "explicit default", "pass")]
        tune.export([res], tmp_path / "v1.json", store=store)          # the default path passed on cpu
        asm = dataclasses.replace(res, chosen={"MODE": "fast_asm"})
        with pytest.raises(UnverifiedPath):
            tune.export([asm], tmp_path / "v1.json", store=store)
        store.dispose()
    finally:
        registry.unregister_impl("rms_norm", "toy_paths")


def test_json_reports_every_path_and_replays_one(tmp_path):
    from kernelbench.harness.verify_run import run_verify
    _toy_impl()
    try:
        url = f"sqlite:///{tmp_path}/kb.sqlite"
        doc = run_verify(["rms_norm"], ["toy_paths"], device="cpu", examples=2, profile="ci", db=url)
        paths = doc["pairs"][0]["paths"]
        assert [(p["label"], p["status"]) for p in paths] == [("default", "pass"),
                                                              ('{"MODE":"fast_asm"}', NOT_HERE),
                                                              ("explicit default", "pass")]
        assert "verify --device cuda" in paths[1]["reason"]
        one = run_verify(["rms_norm"], ["toy_paths"], device="cpu", profile="ci", db=url,
                         params={"M": 1, "N": 8}, values="normal", seed=0, config={"MODE": "plain"})
        assert one["passed"] and one["pairs"][0]["examples"] == 1
    finally:
        registry.unregister_impl("rms_norm", "toy_paths")


def test_probes_run_first_and_replay_by_name():
    from kernelbench.harness.probes import PREFIX, run_probes
    from kernelbench.harness.verify import replay
    registry.load_builtin()
    spec = registry.get_op("mhc_pre")
    ref = registry.get_impl("mhc_pre", "reference")
    seen = []
    run_probes(spec, ref, "cpu", seen.append)
    assert [r.example.values for r in seen] == [PREFIX + f"sinkhorn_iters_{n}" for n in (1, 2, 3)]
    assert all(r.passed for r in seen)
    again = replay(spec, ref, seen[2].example, "cpu")
    assert again.passed and again.example.values == "probe:sinkhorn_iters_3"
    rep = verify_pair(spec, ref, Options(device="cpu", examples=2, profile="ci"))
    assert rep.n == 3 + 2 and not rep.failed


def test_every_probe_holds_for_the_reference():
    """Each probe's input and derived tolerance accept the reference itself (fp64 vs fp64 run)."""
    from kernelbench.harness.probes import run_probes
    registry.load_builtin()
    n = 0
    for spec in registry.ops():
        seen = []
        run_probes(spec, registry.get_impl(spec.name, "reference"), "cpu", seen.append)
        bad = [r.failure for r in seen if not r.passed]
        assert not bad, bad
        n += len(seen)
    assert n >= 12


def _probe_verdicts(spec, fn):
    from kernelbench.harness.probes import run_probes
    impl = registry.Impl(spec.name, "violation", fn)
    seen = []
    run_probes(spec, impl, "cpu", seen.append)
    return {r.example.values.split(":", 1)[1]: r.passed for r in seen}


def _ref(op):
    registry.load_builtin()
    return registry.get_op(op), registry.get_op(op).reference


def test_sinkhorn_probes_see_one_iteration_short():
    spec, ref = _ref("mhc_pre")

    def short(h, fn, base, scale, iters, eps, norm_eps):
        return ref(h, fn, base, scale, max(iters - 1, 1), eps, norm_eps)
    v = _probe_verdicts(spec, short)
    assert v == {"sinkhorn_iters_1": True, "sinkhorn_iters_2": False, "sinkhorn_iters_3": False}


def test_gate_probes_see_tie_and_hash_violations(planted):
    spec, ref = _ref("moe_gate")
    _, ties = planted("topk_ties.py", "moe_gate", "planted_ties")
    assert _probe_verdicts(spec, ties.fn)["topk_ties_lower_index"] is False

    def by_score(x, weight, bias, tid2eid, token_ids, topk, route_scale):   # ignores the hash table
        return ref(x, weight, bias, None, token_ids, topk, route_scale)
    assert _probe_verdicts(spec, by_score)["hash_routing"] is False


def test_attention_probes_see_dropped_sink_and_masked_slot_zero(planted):
    spec, _ = _ref("sparse_attention")
    _, sink = planted("dropped_sink.py", "sparse_attention", "planted_sink")
    _, mask = planted("mask_off_by_one.py", "sparse_attention", "planted_mask")
    assert _probe_verdicts(spec, sink.fn)["sink_above_every_score"] is False
    assert _probe_verdicts(spec, mask.fn)["masked_slots"] is False


def test_swiglu_probes_see_each_clamp():
    import torch.nn.functional as F
    from kernelbench.reference import moe as R
    spec, ref = _ref("moe_experts")

    def variant(g_clamp, u_clamp):
        def swiglu(g, u, limit):
            return F.silu(g_clamp(g, limit)) * u_clamp(u, limit)
        return swiglu

    def run_with(swiglu):     # the reference with its SwiGLU swapped for the violating one
        def fn(**kw):
            old, R.swiglu = R.swiglu, swiglu
            try:
                return ref(**kw)
            finally:
                R.swiglu = old
        return fn
    both = variant(lambda g, lim: g.clamp(-lim, lim), lambda u, lim: u.clamp(-lim, lim))
    no_gate = variant(lambda g, lim: g, lambda u, lim: u.clamp(-lim, lim))
    up_above_only = variant(lambda g, lim: g.clamp(max=lim), lambda u, lim: u.clamp(max=lim))
    assert _probe_verdicts(spec, run_with(both))["swiglu_gate_below_limit"] is False
    assert _probe_verdicts(spec, run_with(no_gate))["swiglu_clamp_above_and_up_below"] is False
    assert _probe_verdicts(spec, run_with(up_above_only))["swiglu_clamp_above_and_up_below"] is False
    assert all(_probe_verdicts(spec, ref).values())
