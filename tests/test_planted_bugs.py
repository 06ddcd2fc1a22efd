"""verify catches deliberately wrong kernels (tests/planted/) and shrinks each to a small example.

Each planted module is loaded the way a user's is (`registry.load_module(path)`), verified with the
derandomized `ci` profile, and must (1) fail, (2) report a minimal example whose params are at the
small end of the op's strategy, (3) say why in the way that bug shows itself, and (4) replay: the
reproduction command's example fails again on its own.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from kernelbench import registry
from kernelbench.harness.verify import Options, replay, verify_pair

PLANTED = Path(__file__).parent / "planted"


@pytest.fixture
def planted():
    """Load a planted module; unregister its implementations afterwards."""
    loaded: list[tuple[str, str]] = []

    def load(file: str, op: str, impl: str):
        registry.load_module(str(PLANTED / file))
        loaded.append((op, impl))
        return registry.get_op(op), registry.get_impl(op, impl)

    yield load
    for op, impl in loaded:
        registry.unregister_impl(op, impl)


def _verify(spec, impl, examples=40, layouts=("contiguous", "strided")):
    # the random engine alone (its shrinking is what these tests check): no semantic probes, which catch
    # some of these bugs first (tests/test_verify_power.py)
    opts = Options(device="cpu", examples=examples, profile="ci", layouts=layouts, shrink_seconds=60, probes=False)
    rep = verify_pair(spec, impl, opts)
    assert rep.failed >= 1, f"{impl.name} was not caught in {rep.n} examples"
    assert len(rep.failures) == 1, "only the final, shrunk failure is reported"
    failure = rep.failures[0]
    replayed = replay(spec, impl, failure.example, "cpu")
    assert not replayed.passed, "the reported example must fail again when replayed"
    assert failure.example.repro().startswith(f"kernelbench verify {spec.name} --impl {impl.name} --params '{{")
    # every example before the failure was recorded with statistics, not just pass/fail
    return failure


def test_mask_off_by_one_in_sparse_attention(planted):
    spec, impl = planted("mask_off_by_one.py", "sparse_attention", "planted_mask")
    f = _verify(spec, impl)
    p = f.example.params
    assert p["T"] == 1 and p["Hl"] == 1 and p["Dh"] == 128, p
    assert "outside tolerance" in f.failure


def test_dropped_sink_term(planted):
    spec, impl = planted("dropped_sink.py", "sparse_attention", "planted_sink")
    f = _verify(spec, impl)
    p = f.example.params
    assert p["T"] == 1 and p["Hl"] == 1 and p["Dh"] == 128 and p["ctx"] <= 2, p
    assert "outside tolerance" in f.failure
    assert f.stats["o"]["rel_fro"] > 2.0 ** -6


def test_wrong_scale_rounding_in_act_quant_fp8(planted):
    spec, impl = planted("scale_rounding.py", "act_quant_fp8", "planted_scale")
    f = _verify(spec, impl)
    p = f.example.params
    assert p["M"] == 1 and p["scale_fmt"] == "ue8m0" and p["K"] <= 256, p
    assert f.stats["s"]["mismatches"] >= 1 and not f.stats["s"]["passed"]


def test_stride_ignoring_load(planted):
    spec, impl = planted("stride_ignoring.py", "rms_norm", "planted_stride")
    # contiguous inputs cannot show it
    opts = Options(device="cpu", examples=10, profile="ci", layouts=("contiguous",))
    assert verify_pair(spec, impl, opts).failed == 0
    f = _verify(spec, impl)
    assert f.example.layout == "strided"
    assert f.example.params["M"] == 1 and f.example.params["N"] == 8, f.example.params
    assert "--layout strided" in f.example.repro()


def test_topk_that_loses_ties(planted):
    spec, impl = planted("topk_ties.py", "moe_gate", "planted_ties")
    f = _verify(spec, impl)
    p = f.example.params
    assert f.example.values == "ties" and not p["hash"], f.example
    assert p["T"] == 1 and p["E"] == 4 and p["D"] == 128, p
    assert not f.stats["indices"]["passed"]


def test_unwritten_output_tail(planted):
    spec, impl = planted("unwritten.py", "rms_norm", "planted_tail")
    f = _verify(spec, impl)
    p = f.example.params
    assert p["M"] == 1 and p["N"] == 8, p
    assert f.stats["y"]["unwritten"] == p["N"] % 64 and "never written" in f.failure
