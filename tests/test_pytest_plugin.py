"""The pytest plugin (kernelbench.pytest_plugin): registered through its entry point, the fixture's
skip without a GPU, and kernelbench samples becoming pytest-benchmark rounds that --benchmark-json
writes and --benchmark-compare-fail judges. Inner pytest runs are subprocesses in a temporary
folder (their own rootdir, no conftest of ours). On a GPU, a real fixture run lands in the database."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

import kernelbench.pytest_plugin as plugin

pytest.importorskip("pytest_benchmark", reason="the plugin reports through pytest-benchmark (kernelbench[pytest])")


def _pytest(tmp_path, source: str, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    (tmp_path / "test_user.py").write_text(source)
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", "--rootdir",
                           str(tmp_path), str(tmp_path / "test_user.py"), *args], cwd=tmp_path, capture_output=True,
                          text=True, timeout=300, env={**_outer_env(), **(env or {})})


def _outer_env() -> dict:
    """This process's environment without pytest-xdist's worker variables: pytest-benchmark turns itself off
    in a run that sees PYTEST_XDIST_WORKER, and the inner run is a plain one."""
    return {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST_")}


def test_plugin_is_registered_through_its_entry_point(request):
    from importlib.metadata import entry_points
    (ep,) = [e for e in entry_points(group="pytest11") if e.name == "kernelbench"]
    assert ep.value == "kernelbench.pytest_plugin"
    assert request.config.pluginmanager.get_plugin("kernelbench") is plugin
    assert request.config.getoption("kb_db") is None and request.config.getoption("kb_no_db") is False
    tag = plugin.session_run_tag(request.config)
    assert tag.startswith("pytest:") and plugin.session_run_tag(request.config) == tag, "one run tag per session"


def test_fixture_skips_without_a_gpu_and_says_why(tmp_path):
    r = _pytest(tmp_path, "def test_k(kernel_bench):\n    kernel_bench('rms_norm', 'triton', {'M': 1, 'N': 64})\n",
                env={"CUDA_VISIBLE_DEVICES": ""})
    assert r.returncode == 0, r.stdout + r.stderr
    assert "1 skipped" in r.stdout and "kernel_bench times kernels on a CUDA GPU and none is visible" in r.stdout


def test_replay_clock_gives_each_sample_as_one_round():
    clock = plugin.ReplayClock([10.0, 2.5])
    reads = [clock() for _ in range(4)]
    assert reads[1] - reads[0] == pytest.approx(10e-6) and reads[3] - reads[2] == pytest.approx(2.5e-6)


SAMPLES_TEST = """
import os
from kernelbench.pytest_plugin import report

def test_kernel(benchmark):
    scale = float(os.environ.get("KB_SCALE", "1"))
    report(benchmark, [scale * s for s in (10.0, 20.0, 30.0, 40.0, 50.0)], {"op": "toy", "impl": "injected"})
"""


def test_samples_become_benchmark_stats_json_and_compare(tmp_path):
    out = tmp_path / "bench.json"
    store = tmp_path / "store"
    r = _pytest(tmp_path, SAMPLES_TEST, f"--benchmark-json={out}", f"--benchmark-storage=file://{store}",
                "--benchmark-autosave")
    assert r.returncode == 0, r.stdout + r.stderr
    doc = json.loads(out.read_text())
    (b,) = doc["benchmarks"]
    st = b["stats"]
    assert b["name"] == "test_kernel" and b["extra_info"] == {"op": "toy", "impl": "injected"}
    assert st["rounds"] == 5 and st["iterations"] == 1
    assert st["min"] == pytest.approx(10e-6) and st["max"] == pytest.approx(50e-6)
    assert st["median"] == pytest.approx(30e-6) and st["mean"] == pytest.approx(30e-6)
    assert st["data"] == pytest.approx([10e-6, 20e-6, 30e-6, 40e-6, 50e-6])
    # the same test 2% slower passes a 5% median gate, 10% slower fails it
    gate = ["--benchmark-storage", f"file://{store}", "--benchmark-compare", "--benchmark-compare-fail=median:5%"]
    ok = _pytest(tmp_path, SAMPLES_TEST, *gate, env={"KB_SCALE": "1.02"})
    assert ok.returncode == 0, ok.stdout + ok.stderr
    bad = _pytest(tmp_path, SAMPLES_TEST, *gate, env={"KB_SCALE": "1.10"})
    assert bad.returncode != 0 and "Performance has regressed" in bad.stdout + bad.stderr


@pytest.mark.gpu
def test_fixture_times_a_registered_kernel_into_both_stores(kernel_bench, tmp_path):
    """Our own GPU benchmark through the fixture: pytest-benchmark stats and a bench_result row."""
    from kernelbench.db.store import Store
    kernel_bench.db_url = f"sqlite:///{tmp_path / 'kb.sqlite'}"
    m = kernel_bench("rms_norm", "triton", {"M": 4, "N": 4096}, max_time_s=0.5)
    stats = kernel_bench.benchmark.stats.stats
    assert m.verified and stats.rounds == m.summary.n
    assert stats.median == pytest.approx(m.summary.median_us * 1e-6)
    (row,) = Store(kernel_bench.db_url).bench_results()
    assert row["samples"] == m.summary.samples and row["run_tag"].startswith("pytest:")


@pytest.mark.gpu
def test_fixture_times_any_function_over_rotating_inputs(kernel_bench, tmp_path):
    import torch
    kernel_bench.db_url = f"sqlite:///{tmp_path / 'kb.sqlite'}"
    made = []

    def make_inputs(i):
        made.append(i)
        return {"x": torch.full((1 << 20,), float(i + 1), device="cuda")}

    s = kernel_bench.function(lambda x: x * 2, make_inputs, label="double 4 MiB", max_time_s=0.5)
    assert len(made) > 1, "rotating input sets were made"
    assert kernel_bench.benchmark.stats.stats.rounds == s.n and s.median_us > 0
    assert kernel_bench.benchmark.extra_info["sets"] == len(made)
