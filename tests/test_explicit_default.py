"""verify's explicit-default check (kernelbench/harness/verify_paths.py explicit_default_verdict): the default
given as a config must run what no config runs, bit for bit (session 22: mHC ran other kernels at 5-16 tokens when
given no config, so tune's first trial and sm_120's inspection judged kernels the step did not run)."""
from __future__ import annotations

import os

import pytest
import torch

from kernelbench import registry
from kernelbench.harness.verify_paths import EXPLICIT_DEFAULT, explicit_default_verdict


def _impl(fn, deterministic=True):
    return registry.Impl(op="rms_norm", name="planted", fn=fn, configs=lambda p: [{"BLOCK": 4}, {"BLOCK": 8}],
                         default_config=lambda p: {"BLOCK": 4}, deterministic=deterministic)


def _run(impl, **kw):
    results = []
    v = explicit_default_verdict(registry.get_op("rms_norm"), impl, "cpu", results.append, **kw)
    return v, results


def _reference(**inputs):
    return registry.get_op("rms_norm").reference(**inputs)


def test_a_wrapper_that_runs_other_code_without_a_config_fails_the_check():
    """A planted difference of one bit in the no-config call fails at every case, names the output and says why."""
    def planted(config=None, **inputs):
        out = _reference(**inputs)
        if config is None:
            out = out.clone()
            out.view(torch.uint8).view(-1)[0] ^= 1                       # the lowest bit of the first element
        return out
    v, results = _run(_impl(planted))
    n = len(registry.get_op("rms_norm").shape_cases("tiny"))
    assert (v.label, v.status, v.examples, v.failed) == (EXPLICIT_DEFAULT, "FAIL", n, n) and n > 0
    assert "differ bit for bit between the call with no config and the call given its default" in results[0].failure
    assert results[0].example.config == {"BLOCK": 4} and not results[0].passed


def test_a_wrapper_that_looks_its_default_up_passes_and_sees_no_tuned_entry(monkeypatch):
    """The no-config call runs with the op's lookups answering the default, whatever KERNELBENCH_PIN_CONFIG says."""
    from kernelbench import tuned_configs
    monkeypatch.setenv("KERNELBENCH_PIN_CONFIG", 'rms_norm={"BLOCK": 8}')
    seen = []

    def honest(config=None, **inputs):
        cfg = config or tuned_configs.lookup("rms_norm", {"M": 1}, {"BLOCK": 4})
        seen.append(cfg["BLOCK"])
        return _reference(**inputs) * (1.0 if cfg["BLOCK"] == 4 else 2.0)
    v, results = _run(_impl(honest), cases=[{"M": 3, "N": 64}])
    assert (v.status, v.examples, v.failed, seen) == ("pass", 1, 0, [4, 4]) and results[0].passed


def test_a_crash_fails_and_a_nondeterministic_impl_is_skipped():
    def crashing(config=None, **inputs):
        if config is not None:
            raise ValueError("BLOCK=4 refused\nmore")
        return _reference(**inputs)
    v, results = _run(_impl(crashing), cases=[{"M": 3, "N": 64}])
    assert v.status == "FAIL" and results[0].failure.endswith("ValueError: BLOCK=4 refused")
    v, results = _run(_impl(crashing, deterministic=False))
    assert v.status == "skipped" and not results
    assert explicit_default_verdict(registry.get_op("rms_norm"), registry.Impl(op="rms_norm", name="x", fn=_reference),
                                    "cpu", results.append) is None


@pytest.mark.skipif(os.environ.get("TRITON_INTERPRET") != "1", reason="runs mHC's kernels: TRITON_INTERPRET=1")
@pytest.mark.parametrize("t", [1, 6])
def test_mhc_runs_the_same_kernels_with_and_without_its_default(t):
    """impl triton of mhc_post_pre_norm at 1 and 6 tokens (PAIR proj4 / mix): the check passes. It failed at 6 before
    the PAIR fix (checked by reverting it: the no-config call ran the previous pair, the explicit one proj4)."""
    results = []
    v = explicit_default_verdict(registry.get_op("mhc_post_pre_norm"), registry.get_impl("mhc_post_pre_norm", "triton"),
                                 "cpu", results.append, cases=[{"T": t, "D": 64, "iters": 3}])
    assert (v.status, v.examples) == ("pass", 1), results[0].failure


def _triton_ops() -> list[str]:
    registry.load_builtin()
    return sorted(s.name for s in registry.ops()
                  if "triton" in registry.impls(s.name) and registry.get_impl(s.name, "triton").configs is not None)


@pytest.mark.skipif(os.environ.get("TRITON_INTERPRET") != "1", reason="runs the kernels: TRITON_INTERPRET=1")
@pytest.mark.parametrize("op", _triton_ops())
def test_every_default_runs_what_no_config_runs(op):
    """Every op's impl triton at its "tiny" cases (the CPU sweep leaves this check out: its cost for every old impl;
    `kernelbench verify` runs it for every pair, on a GPU at the shape set's cases). The MoE ops' defaults are
    inline-PTX decodes: not verified here, on the GPU by verify."""
    results = []
    v = explicit_default_verdict(registry.get_op(op), registry.get_impl(op, "triton"), "cpu", results.append)
    assert v.status in ("pass", "not verified here"), [r.failure for r in results if not r.passed]
    assert v.status == "pass" or op.startswith("moe") or op == "shared_expert", v.reason
