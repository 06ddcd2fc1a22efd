"""The few private upstream internals kernelbench relies on, each checked before use.

None of these has a public API. Each access checks that the internal is still where and what it was
in the versions we test (pyproject's ranges: Triton 3.6 to 3.9, hypothesis 6), and raises
UpstreamChanged, naming the installed version, when a release moved it, instead of silently doing
nothing or failing deep inside a run:

- hypothesis: `engine.MAX_SHRINKING_SECONDS`, the shrink-time limit (verify caps it per run), and the
  `_hypothesis_internal_database_key` attribute that `@given` tests read their example-database key
  from (verify keys it by op and implementation, not by the wrapper's source);
- pytest-benchmark: the fixture's `_timer`, which the `kernel_bench` fixture sets to a clock that
  replays kernelbench's samples (the rounds then carry CUDA-graph times, not host wall time);
- Triton: the interpreter's `_patch_lang_tensor(tensor, scope)` and its builder's comparison
  methods (kernels/common.py fixes one conversion and the comparisons' result type) and the launchers' `run(*args, grid, warmup, **kwargs)` (the inspector records
  launches through it).
"""
from __future__ import annotations

import contextlib
import functools
import inspect
from importlib.metadata import PackageNotFoundError, version
from typing import Callable, Iterator

TRITON_TESTED = "3.6 to 3.9"
HYPOTHESIS_TESTED = "6.x"
PYTEST_BENCHMARK_TESTED = "4.x and 5.x"


class UpstreamChanged(RuntimeError):
    """A private internal of an upstream package is not where kernelbench expects it."""


def installed(dist: str) -> str:
    try:
        return version(dist)
    except PackageNotFoundError:
        return "not installed"


def changed(dist: str, tested: str, what: str) -> UpstreamChanged:
    return UpstreamChanged(f"{dist} {installed(dist)} moved a private internal kernelbench uses ({what}); "
                           f"kernelbench is tested with {dist} {tested}: install a version in that range "
                           f"(pip install '{dist}' with pyproject's bounds) or report it")


# --- hypothesis ------------------------------------------------------------------------------

@contextlib.contextmanager
def hypothesis_shrink_cap(seconds: float) -> Iterator[None]:
    """Cap hypothesis' shrinking time (a module constant, default 300 s) for the block."""
    from hypothesis.internal.conjecture import engine
    old = getattr(engine, "MAX_SHRINKING_SECONDS", None)
    if not isinstance(old, (int, float)):
        raise changed("hypothesis", HYPOTHESIS_TESTED, "hypothesis.internal.conjecture.engine.MAX_SHRINKING_SECONDS")
    engine.MAX_SHRINKING_SECONDS = seconds
    try:
        yield
    finally:
        engine.MAX_SHRINKING_SECONDS = old


@functools.lru_cache(maxsize=None)
def _hypothesis_reads_database_key() -> bool:
    import hypothesis.core
    with open(hypothesis.core.__file__, encoding="utf-8") as f:
        return "_hypothesis_internal_database_key" in f.read()


def set_hypothesis_database_key(test: Callable, key: bytes) -> None:
    """Key a @given test's example-database entries by `key` instead of its source's hash."""
    if not _hypothesis_reads_database_key():
        raise changed("hypothesis", HYPOTHESIS_TESTED, "the _hypothesis_internal_database_key attribute of tests")
    test._hypothesis_internal_database_key = key  # type: ignore[attr-defined]


# --- Triton ----------------------------------------------------------------------------------

def require_launcher_run(cls: type) -> None:
    """`cls.run` must take (*args, grid, warmup, **kwargs), as the inspector's recorder does."""
    run = getattr(cls, "run", None)
    try:
        params = inspect.signature(run).parameters if run is not None else {}
    except (TypeError, ValueError):
        params = {}
    kinds = {n: p.kind for n, p in params.items()}
    if kinds.get("grid") != inspect.Parameter.KEYWORD_ONLY or kinds.get("warmup") != inspect.Parameter.KEYWORD_ONLY:
        raise changed("triton", TRITON_TESTED, f"{cls.__module__}.{cls.__name__}.run(*args, grid, warmup, **kwargs)")


def interpreter_tensor_patcher():
    """triton.runtime.interpreter's `_patch_lang_tensor(tensor, scope)` and the module, checked."""
    import triton.runtime.interpreter as interp
    fn = getattr(interp, "_patch_lang_tensor", None)
    try:
        names = list(inspect.signature(fn).parameters) if fn is not None else []
    except (TypeError, ValueError):
        names = []
    if names != ["tensor", "scope"]:
        raise changed("triton", TRITON_TESTED, "triton.runtime.interpreter._patch_lang_tensor(tensor, scope)")
    return interp, fn


# --- pytest-benchmark ------------------------------------------------------------------------

@functools.lru_cache(maxsize=None)
def _runner_reads_timer(cls: type) -> bool:
    try:
        return "self._timer" in inspect.getsource(cls._make_runner)
    except (AttributeError, OSError, TypeError):
        return False


def benchmark_timer_slot(benchmark) -> None:
    """pytest-benchmark's fixture must time its rounds with `self._timer` (set by kernel_bench)."""
    if not hasattr(benchmark, "_timer") or not _runner_reads_timer(type(benchmark)):
        raise changed("pytest-benchmark", PYTEST_BENCHMARK_TESTED, "BenchmarkFixture._timer read by _make_runner")


def interpreter_compare_ops():
    """triton.runtime.interpreter, its InterpreterBuilder's comparison methods (create_icmp*/create_fcmp*,
    each (self, lhs, rhs)) and TensorHandle(data, dtype), checked."""
    import triton.runtime.interpreter as interp
    builder = getattr(interp, "InterpreterBuilder", None)
    names = [n for n in dir(builder) if n.startswith(("create_icmp", "create_fcmp"))] if builder else []
    handle = getattr(interp, "TensorHandle", None)
    try:
        ok = bool(names) and handle is not None and all(
            list(inspect.signature(getattr(builder, n)).parameters) == ["self", "lhs", "rhs"] for n in names)
    except (TypeError, ValueError):
        ok = False
    if not ok:
        raise changed("triton", TRITON_TESTED, "triton.runtime.interpreter.InterpreterBuilder.create_icmp*/"
                      "create_fcmp*(self, lhs, rhs) and TensorHandle")
    return interp, builder, names
