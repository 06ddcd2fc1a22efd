"""Timing's statistics and stopping rule, the roofline sanity check, fresh rotating inputs, the
reference recheck, and clear refusals without a GPU. The GPU paths (graph replay, events + flush)
are marked gpu and run on the device machine."""
import dataclasses
import math
from pathlib import Path

import pytest
import torch

from kernelbench import registry
from kernelbench.harness import timing

TOY = str(Path(__file__).with_name("kb_toy.py"))


@pytest.fixture(scope="module")
def toy():
    registry.load_module(TOY)
    return registry.get_op("toy_mm")


def test_summary_quantiles_and_relative_standard_error():
    s = timing.summarize([4.0, 1.0, 3.0, 2.0, 5.0])
    assert (s.median_us, s.q1_us, s.q3_us, s.iqr_us) == (3.0, 2.0, 4.0, 2.0)
    assert s.rel_stderr == pytest.approx(math.sqrt(2.5) / math.sqrt(5) / 3.0)
    assert s.samples == [4.0, 1.0, 3.0, 2.0, 5.0]     # raw samples kept in measured order
    with pytest.raises(ValueError):
        timing.summarize([])


class FakeClock:
    def __init__(self, step):
        self.t, self.step = 0.0, step

    def __call__(self):
        self.t += self.step
        return self.t


def test_adaptive_stops_when_the_error_is_small():
    calls = []
    s = timing.adaptive(lambda k: calls.append(k) or [10.0] * k, min_samples=20, batch=10, clock=FakeClock(0.001))
    assert s.n == 20 and len(calls) == 2 and s.rel_stderr == 0


def test_adaptive_keeps_going_on_noise_until_the_cap():
    import random
    rng = random.Random(0)
    noisy = lambda k: [rng.choice([1.0, 100.0]) for _ in range(k)]  # noqa: E731
    s = timing.adaptive(noisy, target_rse=0.001, max_samples=200, max_time_s=1e9, batch=10, clock=FakeClock(0.001))
    assert s.n == 200 and s.rel_stderr > 0.001
    s = timing.adaptive(noisy, target_rse=0.001, max_samples=10 ** 6, max_time_s=0.5, batch=10, clock=FakeClock(0.1))
    assert s.n < 100          # stopped by the time cap


def test_a_time_under_the_roofline_is_a_measurement_error():
    # 4.5 MB through a 4800 GB/s memory cannot take less than ~0.94 us
    assert timing.roofline_floor_us(0, 4.5e6, 989, 4800) == pytest.approx(0.9375)
    msg = timing.check_roofline(0.5, 0, 4.5e6, 989, 4800)
    assert msg and msg.startswith("MEASUREMENT ERROR")
    assert timing.check_roofline(1.2, 0, 4.5e6, 989, 4800) is None
    # compute bound: 2 * 8192^3 FLOPs at 1979 TFLOP/s take >= 555 us
    assert timing.check_roofline(400, 2 * 8192 ** 3, 3 * 2 * 8192 ** 2, 1979, 4800)


def test_rotating_sets_are_fresh_and_cover_three_times_l2(toy):
    params = {"M": 16, "N": 64, "K": 128}
    per = timing.tensor_bytes(toy.make_inputs(params, torch.Generator().manual_seed(0), "cpu", "normal"))
    sets, total, cold = timing.make_sets(toy, params, "cpu", seed=1, l2=10 * per)
    assert len(sets) == 30 and total == 30 * per and cold
    assert not torch.equal(sets[0]["x"], sets[1]["x"]) and bool((sets[0]["x"] != 0).all())
    # beyond the distinct draws, sets are copies at new addresses (what keeps L2 cold)
    assert torch.equal(sets[4]["x"], sets[0]["x"]) and sets[4]["x"].data_ptr() != sets[0]["x"].data_ptr()
    sets, total, cold = timing.make_sets(toy, params, "cpu", seed=1, l2=10 * per, max_sets=4)
    assert len(sets) == 4 and not cold       # the cap is reported, not hidden


def test_draws_of_gives_each_fresh_draw_its_share_of_the_rotation(toy):
    params = {"M": 16, "N": 64, "K": 128}
    per = timing.tensor_bytes(toy.make_inputs(params, torch.Generator().manual_seed(0), "cpu", "normal"))
    sets, _, _ = timing.make_sets(toy, params, "cpu", seed=1, l2=10 * per // 3 + 1)      # 11 sets of 4 draws
    draws, weights = timing.draws_of(sets)
    assert len(sets) == 11 and len(draws) == 4 and weights == [3, 3, 3, 2]
    for j, s in enumerate(sets):                # set j holds draw j % 4's values
        assert torch.equal(s["x"], draws[j % 4]["x"])
    assert timing.draws_of(sets[:2]) == (sets[:2], [1, 1])


def test_timed_cost_is_the_rotation_weighted_mean_of_the_instance_costs(toy):
    import dataclasses
    params = {"M": 3, "N": 64, "K": 128}
    sets = [{"x": torch.full((1,), v)} for v in (1.0, 4.0)]
    assert toy.timed_cost(params, sets) == toy.cost(params)        # no instance cost: the shape's
    valued = dataclasses.replace(toy, instance_cost=lambda p, s: registry.Cost(flops=2.0, bytes=float(s["x"])))
    assert valued.timed_cost(params, sets).bytes == pytest.approx(2.5)
    assert valued.timed_cost(params, sets, [3, 1]).bytes == pytest.approx(7.0 / 4)
    assert valued.timed_cost(params, []) == toy.cost(params)


def test_recheck_compares_with_the_reference(toy):
    params = {"M": 3, "N": 64, "K": 128}
    inputs = toy.make_inputs(params, torch.Generator().manual_seed(2), "cpu", "normal")
    good = {"y": toy.reference(**inputs)}
    ok, detail = timing.recheck(toy, params, good, inputs)
    assert ok and detail == "matches the reference"
    bad = {"y": good["y"].clone()}
    bad["y"][1, 5] += 1.0
    ok, detail = timing.recheck(toy, params, bad, inputs)
    assert not ok and "1/192 mismatches" in detail


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal on a machine without a GPU")
def test_no_gpu_is_a_clear_error(toy):
    with pytest.raises(timing.NoGPUError, match="no CUDA GPU"):
        timing.require_cuda()
    with pytest.raises(timing.NoGPUError):
        timing.measure_impl(toy, registry.get_impl("toy_mm", "reference"), {"M": 1, "N": 64, "K": 128})


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal on a machine without a GPU")
def test_commands_refuse_without_a_gpu():
    from click.testing import CliRunner
    from kernelbench.cli import main
    for args in (["bench", "rms_norm"], ["calibrate"], ["tune", "rms_norm"], ["scaling"]):
        r = CliRunner().invoke(main, args)
        assert r.exit_code != 0 and "no CUDA GPU" in r.output, (args, r.output)


@pytest.mark.gpu
@pytest.mark.parametrize("method", ["graph", "events"])
def test_measure_toy_on_gpu(toy, method):
    impl = registry.get_impl("toy_mm", "triton")
    m = timing.measure_impl(toy, impl, {"M": 16, "N": 64, "K": 128}, method=method, max_time_s=0.5,
                            peaks=(989, 4800))
    assert m.verified and m.roofline_error is None and m.method == method
    assert m.summary.n >= 10 and m.summary.q1_us <= m.summary.median_us <= m.summary.q3_us
    assert len(m.summary.samples) == m.summary.n


@pytest.mark.gpu
def test_measure_counts_the_experts_its_inputs_route_to_on_gpu():
    """A timed MoE run's bytes are its own inputs' (the experts their tokens route to), not the shape's expectation:
    these four hash-routed draws read 1, 0, 1, 0 local experts where the expectation is 1, and the row says so."""
    registry.load_builtin()
    spec, impl = registry.get_op("moe_layer"), registry.get_impl("moe_layer", "triton")
    p = {"T": 1, "D": 256, "E": 8, "El": 4, "offset": 4, "F": 128, "K": 2, "V": 64, "hash": True, "rs": 1.5}
    m = timing.measure_impl(spec, impl, p, max_time_s=0.2)
    sets, _, _ = timing.make_sets(spec, p, "cpu", 0, timing.l2_bytes(torch.device("cuda")))
    want = spec.timed_cost(p, *timing.draws_of(sets))
    assert want.bytes != pytest.approx(spec.cost(p).bytes)
    assert m.verified and m.bytes == pytest.approx(want.bytes)
    assert any(n.startswith("bytes of these inputs") for n in m.notes)


@pytest.mark.gpu
def test_measure_counts_a_packed_impls_own_bytes_on_gpu():
    """A packed-cache impl's row counts its form's bytes (the FP4 key cache's), not the bf16 cache's, and says so; when
    its prepare keeps the inputs (they did not pack) the row counts the op's bytes and says that."""
    registry.load_builtin()
    spec, impl = registry.get_op("csa_indices"), registry.get_impl("csa_indices", "triton_fp4keys")
    p = {"T": 2, "Hi": 64, "topk": 64, "ctx": 4096, "cap": 1024, "ragged": False, "W": 128}
    m = timing.measure_impl(spec, impl, p, max_time_s=0.2)
    assert m.verified and m.bytes == pytest.approx(spec.form_cost("fp4keys", p).bytes)
    assert m.bytes < spec.cost(p).bytes and any(n.startswith("bytes: its fp4keys form") for n in m.notes)
    kept = dataclasses.replace(impl, prepare=lambda inputs: inputs)    # inputs that do not pack: the bf16 path
    m = timing.measure_impl(spec, kept, p, max_time_s=0.2)
    assert m.verified and m.bytes == pytest.approx(spec.cost(p).bytes)
    assert any("did not pack into its fp4keys form" in n for n in m.notes)
