"""Progress of the long commands (issue 10, item 12): bench, tune and scaling print one progress line per
work item (kernelbench/progress.py: a rich bar on a terminal, numbered lines elsewhere). Run on a CPU
with the GPU parts replaced (the timer, the tuner, the GPU fingerprint): what is checked is that every
item is announced with its number and the total, so removing the progress fails these tests."""
from __future__ import annotations

import re

import pytest
from click.testing import CliRunner

from kernelbench import registry


def _progress_lines(output: str, what: str) -> list[tuple[int, int, str]]:
    """(n, total, label) of each `WHAT [n/total] label (t s)` line."""
    pat = re.compile(rf"^{re.escape(what)} \[(\d+)/(\d+)\] (.*) \(\d+ s\)$")
    return [(int(m[1]), int(m[2]), m[3]) for m in map(pat.match, output.splitlines()) if m]


@pytest.fixture
def fake_gpu(monkeypatch, tmp_path):
    """A CPU pretending to be an H200 for the commands' set-up (no kernel runs on it)."""
    from kernelbench.harness import fingerprint as fp_mod
    from kernelbench.harness import timing
    real = fp_mod.fingerprint
    monkeypatch.setattr(timing, "require_cuda", lambda: None)
    monkeypatch.setattr(fp_mod, "fingerprint", lambda device=None: {**real("cpu"), "device_type": "cuda",
                                                                   "gpu_name": "NVIDIA H200"})
    return f"sqlite:///{tmp_path / 'kb.sqlite'}"


def _measurement(spec, impl, params, **_):
    from kernelbench.harness import timing
    cost = spec.cost(params)
    return timing.Measurement(op=spec.name, impl=impl.name, params=params, label=spec.label(params), config={},
                              method="graph", summary=timing.Summary(10.0, 9.9, 10.1, 10.0, 0.001, 5, [10.0] * 5),
                              flops=cost.flops, bytes=cost.bytes, sets=1, rotated_bytes=0, l2_cold=True, launches=1,
                              sm_clock_mhz=None, verified=True, verify_detail="", roofline_error=None)


def test_bench_announces_every_case(fake_gpu, monkeypatch):
    from kernelbench.harness import timing
    from kernelbench.commands.bench import command
    from kernelbench.harness.bench import select_cases
    monkeypatch.setattr(timing, "measure_impl", _measurement)
    registry.load_builtin()
    n = len(select_cases(registry.get_op("rms_norm"), ("flash-tp8",), (), ())) * len(registry.impls("rms_norm"))
    res = CliRunner().invoke(command, ["rms_norm", "--db", fake_gpu])
    assert res.exit_code == 0, res.output
    lines = _progress_lines(res.output, "bench")
    assert [(i, t) for i, t, _ in lines] == [(i, n) for i in range(1, n + 1)], res.output
    assert all(label.startswith("rms_norm/") for _, _, label in lines)


def test_tune_announces_every_shape(fake_gpu, monkeypatch):
    from kernelbench.harness import tune as tuner
    from kernelbench.harness.bench import select_cases
    from kernelbench.commands.tune import command
    seen = []

    def fake_tune_one(spec, impl, params, **_):
        seen.append(params)
        return tuner.TuneResult(spec.name, impl.name, params, params, "NVIDIA H200", [], None, None)
    monkeypatch.setattr(tuner, "tune_one", fake_tune_one)
    registry.load_builtin()
    n = len(select_cases(registry.get_op("rms_norm"), ("flash-tp8",), (), ()))
    res = CliRunner().invoke(command, ["rms_norm", "--impl", "triton", "--no-isolate", "--no-export",
                                       "--db", fake_gpu])
    assert res.exit_code == 0, res.output
    lines = _progress_lines(res.output, "tune (budget 600 s)")
    assert [(i, t) for i, t, _ in lines] == [(i, n) for i in range(1, n + 1)] and len(seen) == n, res.output
    assert all(label.startswith("rms_norm/triton ") for _, _, label in lines)


def test_scaling_announces_every_point(fake_gpu, monkeypatch):
    from kernelbench.harness import scaling as sc
    from kernelbench.harness import timing
    from kernelbench.harness import bench
    from kernelbench.commands.scaling import command
    monkeypatch.setattr(timing, "measure_impl", lambda spec, impl, params, **k: _measurement(spec, impl, params))
    monkeypatch.setattr(bench, "free_memory", lambda: None)
    registry.load_builtin()
    points = [v for axis, _, _, values in sc.PRESETS["indexer_topk"] if axis == "batch" for v in values]
    impls = registry.impls("indexer_topk")
    res = CliRunner().invoke(command, ["indexer_topk", "--axis", "batch", "--db", fake_gpu])
    assert res.exit_code == 0, res.output
    n = len(points) * len(impls)
    lines = _progress_lines(res.output, "scaling (points)")
    assert [(i, t) for i, t, _ in lines] == [(i, n) for i in range(1, n + 1)], res.output
    assert {label for _, _, label in lines} == {f"indexer_topk/{name} batch" for name in impls}


def test_verify_announces_every_pair(tmp_path):
    from kernelbench.commands.verify import command
    res = CliRunner().invoke(command, ["rms_norm", "hadamard", "--impl", "reference", "--examples", "1",
                                       "--device", "cpu", "--profile", "ci", "--db", f"sqlite:///{tmp_path / 'kb.sqlite'}"])
    assert res.exit_code == 0, res.output
    pat = re.compile(r"^verify \[(\d+)/(\d+)\] (\S+) / reference \(\d+ s[,)]")
    lines = [(int(m[1]), int(m[2]), m[3]) for m in map(pat.match, res.output.splitlines()) if m]
    assert lines == [(1, 2, "hadamard"), (2, 2, "rms_norm")] or lines == [(1, 2, "rms_norm"), (2, 2, "hadamard")], \
        res.output


def test_inspect_announces_every_job(capsys, monkeypatch):
    """Both paths (in-process, and the subprocesses used under the interpreter or with several workers) report
    each finished job; implementations that launch no kernel keep this test free of compiles. One worker: in job
    order; two: each job once, in whichever order they finish."""
    from pathlib import Path
    from kernelbench.harness import inspector
    toy = str(Path(__file__).with_name("kb_toy.py"))
    registry.load_module(toy)
    jobs = [("toy_mm", "torch_only", {"M": m, "N": 64, "K": 128}, None) for m in (1, 16)]
    labels = ["toy_mm/torch_only M=1,N=64,K=128", "toy_mm/torch_only M=16,N=64,K=128"]
    monkeypatch.setenv("KERNELBENCH_INSPECT_WORKERS", "1")
    reps = inspector.inspect_jobs(jobs, target="sm_120", modules=(toy,), progress=True)
    assert len(reps) == 2
    lines = _progress_lines(capsys.readouterr().err, "inspect (sm_120)")
    assert [(i, t) for i, t, _ in lines] == [(1, 2), (2, 2)]
    assert [label for _, _, label in lines] == labels
    done = []
    reps = inspector.inspect_jobs(jobs, target="sm_120", modules=(toy,), progress=True, workers=2,
                                  on_done=done.append)
    assert [r["label"] for r in reps] == ["M=1,N=64,K=128", "M=16,N=64,K=128"] and sorted(done) == sorted(labels)
    lines = _progress_lines(capsys.readouterr().err, "inspect (sm_120)")
    assert [(i, t) for i, t, _ in lines] == [(1, 2), (2, 2)] and sorted(lb for _, _, lb in lines) == sorted(labels)
