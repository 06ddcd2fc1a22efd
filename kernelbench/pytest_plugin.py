"""pytest plugin (entry point `pytest11`, loaded wherever kernelbench is installed): the `kernel_bench`
fixture times a kernel with kernelbench's timing and reports the samples to pytest-benchmark.

    def test_my_rms_norm(kernel_bench):
        m = kernel_bench("rms_norm", "triton", {"T": 4, "D": 4096})       # a registered implementation
        m = kernel_bench("rms_norm", my_rms_norm, {"T": 4, "D": 4096})    # your function for a known op
        m = kernel_bench.function(my_fn, make_inputs)                     # any function: make_inputs(i) -> kwargs

A known op is timed by `timing.measure_impl`: CUDA-graph replays over rotating input sets that cover
>= 3 x L2 (cold L2), and the timed outputs are rechecked against the registered reference; a wrong
output or a time under the roofline floor fails the test. `function` times any callable the same way
(graph, rotating sets from `make_inputs`) without a reference. The samples (one per graph replay,
divided by its launch count) become the benchmark's rounds, so `--benchmark-json`,
`--benchmark-compare` and `--benchmark-compare-fail=median:5%` work as for any pytest-benchmark test,
and the same samples are stored as a bench_result row in the kernelbench database (--kb-db, default
$KERNELBENCH_DB or the user data dir; --kb-no-db to skip). Without a GPU the test is skipped with the
reason; without pytest-benchmark it fails saying which extra to install.
"""
from __future__ import annotations

import datetime as _dt
import hashlib
import importlib.util
import inspect
import warnings
from typing import Any, Callable, Sequence

import pytest

RUN_TAG_PREFIX = "pytest"


def pytest_addoption(parser):
    group = parser.getgroup("kernelbench", "kernelbench's kernel_bench fixture")
    group.addoption("--kb-db", default=None, metavar="URL",
                    help="kernelbench database for kernel_bench results (default $KERNELBENCH_DB or the user data dir)")
    group.addoption("--kb-no-db", action="store_true", default=False,
                    help="do not store kernel_bench results in the kernelbench database")


def session_run_tag(config) -> str:
    """One run tag per pytest session ("pytest:<UTC start>"): `kernelbench export --run-tag` takes it."""
    tag = getattr(config, "_kernelbench_run_tag", None)
    if tag is None:
        tag = f"{RUN_TAG_PREFIX}:{_dt.datetime.now(_dt.timezone.utc).strftime('%Y-%m-%dT%H:%M:%S.%fZ')}"
        config._kernelbench_run_tag = tag
    return tag


class ReplayClock:
    """A timer that replays measured durations: pytest-benchmark reads it twice around each round,
    so consecutive (start, end) pairs differ by the next sample. Samples in microseconds."""

    __name__ = "kernelbench.harness.timing"

    def __init__(self, samples_us: Sequence[float]):
        self._seconds = [float(s) * 1e-6 for s in samples_us]
        self._now = 0.0
        self._reads = 0

    def __call__(self) -> float:
        if self._reads % 2 == 1:       # the end of a round
            self._now += self._seconds[self._reads // 2]
        self._reads += 1
        return self._now

    def __repr__(self) -> str:
        return "kernelbench.harness.timing (CUDA-graph replay samples)"


def report(benchmark, samples_us: Sequence[float], extra_info: dict | None = None) -> None:
    """Give pytest-benchmark's fixture `benchmark` these samples (us) as its rounds, one per sample."""
    from kernelbench.upstream import benchmark_timer_slot
    if not samples_us:
        raise ValueError("no samples to report")
    benchmark_timer_slot(benchmark)
    benchmark._timer = ReplayClock(samples_us)
    benchmark.extra_info.update(extra_info or {})
    benchmark.pedantic(lambda: None, rounds=len(samples_us), iterations=1, warmup_rounds=0)


class KernelBench:
    """What the `kernel_bench` fixture returns (see the module docstring)."""

    def __init__(self, benchmark, config: pytest.Config, nodeid: str):
        self.benchmark = benchmark
        self.db_url = config.getoption("kb_db")
        self.use_db = not config.getoption("kb_no_db")
        self.nodeid = nodeid
        self.run_tag = session_run_tag(config)

    def __call__(self, op: str, impl: str | Callable = "triton", params: dict | None = None, *,
                 config: dict | None = None, method: str = "graph", **adaptive_kw):
        from kernelbench import registry
        from kernelbench.harness import timing
        from kernelbench.harness.bench import peaks_for
        from kernelbench.harness.fingerprint import fingerprint
        spec = registry.get_op(op)
        if params is None:
            raise ValueError(f"kernel_bench({op!r}, ...): pass params, e.g. {spec.shape_cases('flash-tp8')[0]}")
        if callable(impl):
            impl = registry.Impl(op, getattr(impl, "__name__", "user"), impl, source=impl.__module__)
        else:
            impl = registry.get_impl(op, impl)
        device = fingerprint("cuda")["gpu_name"]
        m = timing.measure_impl(spec, impl, params, config=config, method=method, peaks=peaks_for(device),
                                **adaptive_kw)
        if not m.verified:
            pytest.fail(f"{op}/{impl.name} {m.label}: the timed outputs differ from the reference: {m.verify_detail}",
                        pytrace=False)
        if m.roofline_error:
            pytest.fail(f"{op}/{impl.name} {m.label}: {m.roofline_error}", pytrace=False)
        info = {"op": op, "impl": impl.name, "params": m.params, "config": m.config, "method": m.method,
                "launches": m.launches, "sets": m.sets, "l2_cold": m.l2_cold, "verified": m.verify_detail,
                "gbps": m.gbps, "tflops": m.tflops, "device": device, "notes": m.notes}
        report(self.benchmark, m.summary.samples, info)
        if self.use_db:
            self._store_known(impl, m)
        return m

    def function(self, fn: Callable, make_inputs: Callable[[int], dict], *, label: str = "",
                 max_sets: int = 256, method: str = "graph", **adaptive_kw):
        """Time `fn(**make_inputs(i))` over rotating input sets (no reference: nothing is rechecked).
        Returns the timing.Summary."""
        import torch

        from kernelbench.harness import timing
        first = make_inputs(0)
        per = max(1, timing.tensor_bytes(first))
        l2 = timing.l2_bytes()
        n = max(1, min(max_sets, -(-timing.L2_ROTATE_FACTOR * l2 // per)))
        sets = [first] + [make_inputs(i) for i in range(1, n)]
        calls = [(lambda s=s: fn(**s)) for s in sets]
        calls[0]()
        torch.cuda.synchronize()
        launches = 1
        if method == "graph":
            summary, _, launches = timing.time_graph(calls, **adaptive_kw)
        else:
            summary = timing.time_events(calls, **adaptive_kw)
        name = getattr(fn, "__qualname__", "function")
        info = {"function": name, "label": label, "method": method, "launches": launches, "sets": n,
                "l2_cold": n * per >= timing.L2_ROTATE_FACTOR * l2}
        report(self.benchmark, summary.samples, info)
        if self.use_db:
            self._store_function(fn, name, label, method, summary, info)
        return summary

    # the kernelbench database ------------------------------------------------------------------
    def _store(self):
        from kernelbench.db.store import Store
        from kernelbench.harness.fingerprint import fingerprint, git_commit
        store = Store(self.db_url)
        return store, store.environment_id(fingerprint("cuda")), git_commit()

    def _store_known(self, impl, m) -> None:
        from kernelbench.harness.bench import record
        from kernelbench.db.errors import DuplicateResult
        store, env, git = self._store()
        try:
            record(store, env, impl, m, None, self.run_tag, git)
        except DuplicateResult:   # the same (impl, params, config) timed twice in one session: keep the first
            warnings.warn(f"kernel_bench: {m.op}/{m.impl} {m.label} was already stored in run {self.run_tag}; "
                          f"this timing is reported to pytest-benchmark only", stacklevel=3)

    def _store_function(self, fn, name: str, label: str, method: str, summary, info: dict) -> None:
        try:
            source = inspect.getsource(fn)
        except (OSError, TypeError):
            source = name
        store, env, git = self._store()
        impl_id = store.op_impl_id(f"user:{name}", "function", hashlib.sha256(source.encode()).hexdigest()[:16],
                                   family="user", backend="user", source=getattr(fn, "__module__", "") or "")
        store.add_bench_results([dict(
            environment_id=env, implementation_id=impl_id, shape_label=label or self.nodeid[-255:],
            params={"test": self.nodeid}, config={}, method=method, median_us=summary.median_us,
            q1_us=summary.q1_us, q3_us=summary.q3_us, n=summary.n, rel_stderr=summary.rel_stderr,
            samples=summary.samples, git_commit=git, run_tag=self.run_tag, extra=info)])


@pytest.fixture
def kernel_bench(request) -> Any:
    """Time a kernel with kernelbench's timing, reported through pytest-benchmark (module docstring)."""
    if importlib.util.find_spec("pytest_benchmark") is None:
        pytest.fail("the kernel_bench fixture reports through pytest-benchmark, which is not installed: "
                    "pip install 'kernelbench[pytest]'", pytrace=False)
    import torch
    if not torch.cuda.is_available():
        pytest.skip("kernel_bench times kernels on a CUDA GPU and none is visible")
    return KernelBench(request.getfixturevalue("benchmark"), request.config, request.node.nodeid)
