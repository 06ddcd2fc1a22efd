"""The latency probes of `kernelbench calibrate` (kernels/probe.py): each launch does the work it counts (in the
interpreter here), the ticketed tail sums every program's partial once and re-arms its ticket, and the calibration
measures refuse a machine without a GPU. On the device: the three measures run, pass their own count check and give
positive per-launch times."""
import pytest
import torch

from kernelbench.harness import calibrate, timing
from kernelbench.kernels import probe


def test_launch_probe_counts_each_launch_once():
    count = torch.zeros(1, dtype=torch.int32)
    for _ in range(3):
        probe.launch_probe(count, programs=5)
    assert count.item() == 3


@pytest.mark.parametrize("programs", (1, 6, 9))
@pytest.mark.parametrize("sem,gather", (("acq_rel", True), ("release", True), ("relaxed", False)))
def test_ticket_probe_sums_every_partial_and_rearms(programs, sem, gather):
    part = torch.full((programs,), -3, dtype=torch.int32)           # poisoned: every program must overwrite its own
    ticket = torch.zeros(1, dtype=torch.int32)
    count = torch.zeros(1, dtype=torch.int32)
    for launch in range(1, 3):
        probe.ticket_probe(part, ticket, count, sem=sem, gather=gather)
        assert count.item() == launch * programs * (programs + 1) // 2
        assert ticket.item() == 0
    assert part.tolist() == list(range(1, programs + 1))


@pytest.mark.parametrize("programs,group,levels", ((9, 1, 1), (9, 4, 1), (16, 4, 1), (9, 4, 2), (16, 8, 2), (5, 8, 2)))
@pytest.mark.parametrize("gather", (True, False))
def test_grouped_ticket_probe_sums_each_group_once_and_rearms(programs, group, levels, gather):
    """Tickets per group of programs (the last of each adds its group's partials) and the two-level tree (the last
    group's last adds them all): the count is each partial once per launch, and every ticket is zero again."""
    part = torch.full((programs,), -3, dtype=torch.int32)
    tickets = torch.full((probe.ticket_count(programs, group, levels) + 1,), 0, dtype=torch.int32)
    tickets[-1] = 7                                                 # one past the last ticket: never touched
    count = torch.zeros(1, dtype=torch.int32)
    for launch in range(1, 3):
        probe.ticket_probe(part, tickets, count, gather=gather, group=group, levels=levels)
        assert count.item() == launch * programs * (programs + 1) // 2
        assert tickets[:-1].tolist() == [0] * (tickets.numel() - 1) and tickets[-1].item() == 7
    assert part.tolist() == list(range(1, programs + 1))


def test_ticket_probe_rejects_a_bad_tree():
    part, count = torch.zeros(4, dtype=torch.int32), torch.zeros(1, dtype=torch.int32)
    for group, levels in ((3, 1), (-1, 1), (0, 2), (4, 3)):
        with pytest.raises(ValueError, match="ticket_probe"):
            probe.ticket_probe(part, torch.zeros(8, dtype=torch.int32), count, group=group, levels=levels)
    with pytest.raises(ValueError, match="1 tickets for 3 needed"):               # 2 groups of 2 and the top
        probe.ticket_probe(part, torch.zeros(1, dtype=torch.int32), count, group=2, levels=2)


def test_latency_measures_are_registered_and_need_a_gpu(monkeypatch):
    assert {"launch_us", "launch_pdl_us", "ticket_us"} <= set(calibrate.MEASURES)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    for name in ("launch_us", "launch_pdl_us", "ticket_us"):
        with pytest.raises(timing.NoGPUError):
            calibrate.MEASURES[name]()


@pytest.mark.gpu
def test_gpu_latency_measures():
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU; runs on the device machine (scripts/device_gpu_tests.sh)")
    names = ["launch_us", "ticket_us"] + (["launch_pdl_us"] if torch.cuda.get_device_capability()[0] >= 9 else [])
    got = calibrate.calibrate(names, log=print)
    assert [c.measure for c in got] == names                          # none was skipped by an error
    for c in got:
        assert c.unit == "us" and c.summary.n > 0
        low = -5.0 if c.measure == "ticket_us" else 0.0               # a difference of two medians
        assert low < c.value < 100.0, (c.measure, c.value)


def test_calibrate_logs_latencies_to_the_nanosecond_and_skips_a_failed_measure(monkeypatch):
    """A latency is logged with three decimals (its spread between captures is ~0.1 us); a measure that raises is
    reported as not measured and the others still run."""
    fake = calibrate.Ceiling("launch_us", 0.8036, "us", timing.summarize([0.80, 0.8036, 0.81]), "fake")

    def broken():
        raise RuntimeError("no PDL here")

    monkeypatch.setattr(calibrate, "MEASURES", {"launch_us": lambda: fake, "launch_pdl_us": broken})
    lines = []
    got = calibrate.calibrate(["launch_pdl_us", "launch_us"], log=lines.append)
    assert got == [fake]
    assert lines == ["launch_pdl_us: not measured (RuntimeError: no PDL here)",
                     "launch_us: 0.804 us (median of 3, IQR 0.005 us)"]
