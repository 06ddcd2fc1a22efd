"""Scaling analysis on the real op specs with modelled timers: the fit, and the two findings our
users needed (cost that follows allocated capacity, per-request cost that batching does not
amortize), without flagging noise or work that legitimately grows."""
import math
from types import SimpleNamespace

import pytest

from kernelbench import registry
from kernelbench.harness import scaling as sc

H200_GBPS, H200_TFLOPS = 4250.0, 1250.0


def timer(fn, spread=0.02):
    def measure(spec, impl, params):
        t = fn(params)
        return SimpleNamespace(median_us=t, q1_us=t * (1 - spread), q3_us=t * (1 + spread))
    return measure


def run(op, axis, fn, spread=0.02):
    (preset,) = [p for p in sc.PRESETS.get(op, []) if p[0] == axis] or [None]
    spec = registry.get_op(op)
    impl = SimpleNamespace(name="model")
    _, base, key, values = preset
    return sc.sweep(spec, impl, axis, base, key, values, timer(fn, spread), H200_GBPS, H200_TFLOPS,
                    derive=sc.DERIVE.get((op, axis)))


def test_fit_line_recovers_the_users_step_model():
    fit = sc.fit_line([1, 16, 64], [40 + 31 * n for n in (1, 16, 64)])
    assert fit.a == pytest.approx(40) and fit.b == pytest.approx(31) and fit.r2 == pytest.approx(1)
    with pytest.raises(ValueError):
        sc.fit_line([1], [2])


def test_fit_line_confidence_interval_covers_the_truth_and_shrinks_with_points():
    import random
    rng = random.Random(7)
    xs = [1, 2, 4, 8, 16, 32, 64, 128]
    covered = 0
    for _ in range(200):
        fit = sc.fit_line(xs, [40 + 0.3 * x + rng.gauss(0, 1.0) for x in xs])
        covered += abs(fit.b - 0.3) <= fit.b_ci and abs(fit.a - 40) <= fit.a_ci
    assert 150 <= covered <= 200                          # ~90% joint coverage of two 95% intervals
    wide = sc.fit_line(xs[:3], [40 + 0.3 * x + e for x, e in zip(xs, (1, -1, 1))])
    narrow = sc.fit_line(xs * 4, [40 + 0.3 * x + e for x, e in zip(xs * 4, (1, -1) * 16)])
    assert narrow.b_ci < wide.b_ci
    assert math.isnan(sc.fit_line([1, 2], [3, 4]).b_ci)   # two points leave no residual to estimate from


def test_indexer_cost_following_capacity_is_flagged():
    # the bug: every step scores the whole allocated cache (cap rows), whatever the tokens present
    buggy = run("indexer_topk", "capacity", lambda p: 5 + p["T"] * p["cap"] * 128 * 2 / 4250e3)
    assert buggy.flags and "allocated capacity" in buggy.flags[0]
    assert buggy.modeled_growth == pytest.approx(1.0)
    # the fix: the work follows the actual length (ctx), the capacity only costs memory
    fixed = run("indexer_topk", "capacity", lambda p: 5 + p["T"] * (p["ctx"] // 4) * 128 * 2 / 4250e3)
    assert fixed.flags == [] and fixed.growth == pytest.approx(1.0)


def test_context_growth_that_tracks_the_work_is_not_flagged():
    spec = registry.get_op("indexer_topk")
    honest = run("indexer_topk", "context", lambda p: 2 * sc.modeled_us(spec, p, H200_GBPS, H200_TFLOPS))
    assert honest.flags == [] and honest.growth > 10   # it grows a lot, as the work does
    quadratic = run("indexer_topk", "context", lambda p: 3 + 1e-6 * p["ctx"] ** 2)
    assert quadratic.flags and "faster with context" in quadratic.flags[0]


def test_per_request_cost_not_amortized_is_flagged_with_its_throughput_cap():
    base = {"M": 1, "N": 4096, "K": 4096}
    spec = registry.get_op("fp8_linear")
    impl = SimpleNamespace(name="model")
    flat = sc.sweep(spec, impl, "batch", base, "M", [1, 16, 64], timer(lambda p: 10 + 0.02 * p["M"]), H200_GBPS, H200_TFLOPS)
    assert flat.flags == []
    per_req = sc.sweep(spec, impl, "batch", base, "M", [1, 16, 64], timer(lambda p: 40 + 31 * p["M"]), H200_GBPS,
                       H200_TFLOPS)
    assert per_req.flags and "not amortized" in per_req.flags[0]
    assert per_req.fit.b == pytest.approx(31) and "32,258 requests/s" in per_req.flags[0]


def test_noise_is_never_a_finding():
    # x1.4 growth at capacity but the end points' spreads overlap (+-25%): not beyond noise
    noisy = run("indexer_topk", "capacity", lambda p: 10 * (1.4 if p["cap"] > 100000 else 1.0), spread=0.25)
    assert noisy.flags == []


def test_presets_build_valid_params():
    for op, presets in sc.PRESETS.items():
        spec = registry.get_op(op)
        for axis, base, key, values in presets:
            assert axis in sc.AXES and key in base
            for v in values:
                p = {**base, key: v}
                p = sc.DERIVE.get((op, axis), lambda q: q)(p)
                c = spec.cost(p)
                assert c.bytes > 0


def test_scaling_work_selects_presets_and_refuses_unknown_ops():
    registry.load_builtin()
    work = sc.scaling_work(("indexer_topk",), ("reference",), ("batch",))
    assert [(w[0].name, w[1].name, w[2], w[4]) for w in work] == [("indexer_topk", "reference", "batch", "T")]
    every = sc.scaling_work((), (), ())
    assert {w[0].name for w in every} == set(sc.PRESETS)
    with pytest.raises(ValueError, match="no scaling preset for 'rms_norm'"):
        sc.scaling_work(("rms_norm",), (), ())
