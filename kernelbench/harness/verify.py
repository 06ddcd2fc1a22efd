"""The verification engine: every (op, implementation) of the registry against its fp64 reference.

For each pair, `verify_pair` runs
  * the real deployment shapes of a shape set (`OpSpec.shape_cases`, e.g. flash-tp8 at C = 1, 16, 64),
    when one is given (the default on CUDA), and
  * hypothesis: params from `OpSpec.strategy()`, a value mode from `OpSpec.value_modes`, a seed for
    the input generator and a memory layout (contiguous or strided views), each checked by
    `verify_check.check_example`. A failure shrinks to a minimal example, which is reported with the
    command that replays it; under the `explore` profile hypothesis keeps it in its example
    database (db.paths.data_dir()/hypothesis) and replays it first next time.
Every example's error statistics go to the `on_result` callback (the CLI records them in the
database: `Recorder`); after a failure, only the final shrunk example is reported.

On CPU the Triton kernels run in the interpreter (TRITON_INTERPRET=1 must be set before the kernels
are imported; `prepare_device` does it), where bf16 `tl.dot` operands are upcast to fp32
(kernels/common.py): `INTERPRETER_NOTE` says so in every CPU report.
"""
from __future__ import annotations

import contextlib
import dataclasses
import os
import time
from dataclasses import dataclass, field
from typing import Callable, Iterable

from kernelbench.upstream import hypothesis_shrink_cap, set_hypothesis_database_key
from kernelbench.harness.verify_check import LAYOUTS, Example, ExampleError, ExampleResult, check_example

INTERPRETER_NOTE = ("CPU mode: Triton kernels ran in the Triton interpreter, where bf16 tl.dot operands are "
                    "upcast to fp32 (triton issue 11584 workaround, kernels/common.py): this proves the kernels' "
                    "indexing, masking and math, not the bf16 tensor-core path; `kernelbench verify --device "
                    "cuda` on a GPU checks that.")
NO_INTERPRETER = ("the Triton kernels were imported without TRITON_INTERPRET=1 and no GPU is in use; run "
                  "`kernelbench verify --device cpu` in a fresh process (it sets TRITON_INTERPRET=1)")


EDGE_MODES = ("boundary",)   # value modes every verify run draws (ops/quant.py boundary_values)


class DeviceError(RuntimeError):
    pass


def prepare_device(device: str | None) -> str:
    """Resolve the device ("cuda" if a GPU is visible, else "cpu") and set up the Triton mode: on CPU,
    TRITON_INTERPRET=1 unless already set; on CUDA, a clear error without a GPU or with the
    interpreter forced on. Call before anything imports kernelbench.kernels."""
    import torch
    if device is None:
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda"):
        if not torch.cuda.is_available():
            raise DeviceError("--device cuda: no CUDA GPU is visible (torch.cuda.is_available() is False); use "
                              "--device cpu to run the kernels in the Triton interpreter")
        if os.environ.get("TRITON_INTERPRET") == "1":
            raise DeviceError("--device cuda with TRITON_INTERPRET=1 set: the kernels would run in the interpreter; "
                              "unset TRITON_INTERPRET")
    elif device == "cpu":
        os.environ.setdefault("TRITON_INTERPRET", "1")
    else:
        raise DeviceError(f"unknown device {device!r}; use cuda or cpu")
    return device


def interpreter_active() -> bool:
    try:
        from kernelbench.kernels.common import INTERPRET
    except ImportError:
        return os.environ.get("TRITON_INTERPRET") == "1"
    return INTERPRET


def skip_reason(impl, device: str) -> str | None:
    """Why an implementation cannot run on this device, or None."""
    if impl.backend == "triton" and device == "cpu" and not interpreter_active():
        return NO_INTERPRETER
    if impl.backend not in ("torch", "triton") and device == "cpu":
        return f"backend {impl.backend!r} needs a GPU"
    return None


@dataclass
class Options:
    device: str = "cpu"
    examples: int = 20                   # hypothesis examples per (op, impl)
    profile: str = "ci"                  # "ci": derandomized, no example database; "explore": database
    shape_set: str | None = None         # real deployment cases to run first (None: none)
    case_values: tuple[str, ...] = ("normal",)
    layouts: tuple[str, ...] = LAYOUTS
    kernel_modules: tuple[str, ...] = ()  # shown in reproduction commands
    shrink_seconds: float = 120.0         # cap on hypothesis' shrinking of one failure (its default: 300)
    time_budget_s: float | None = None    # per pair: after this, hypothesis examples are skipped (not counted)
    probes: bool = True                   # run the op's semantic probes (kernelbench/harness/probes.py) first
    path_examples: int | None = None      # per config path (verify_paths.py) and edge mode; None: examples // 4, >= 1
    explicit_default: bool = True         # the default given as a config runs what no config runs, bit for bit, at
                                          # the shape set's cases, else the op's "tiny" ones (explicit_default_verdict)
    where: dict | None = None             # --where: only the shape set's cases whose params match (bench's parse_where)


@dataclass
class PairReport:
    op: str
    impl: str
    backend: str
    n: int = 0
    failed: int = 0
    rejected: int = 0
    skipped: str = ""
    failures: list[ExampleResult] = field(default_factory=list)   # minimal failing examples
    worst: dict = field(default_factory=dict)                     # output -> worst max_abs/max_rel/rel_fro/cosine
    notes: list[str] = field(default_factory=list)
    paths: list = field(default_factory=list)                     # verify_paths.PathVerdict per extra config

    @property
    def status(self) -> str:
        if self.skipped:
            return "skipped"
        return "FAIL" if self.failed else ("pass" if self.n else "not run")   # zero examples is no verdict

    def add(self, r: ExampleResult) -> None:
        self.n += 1
        self.failed += 0 if r.passed else 1
        self.rejected += 1 if r.rejected else 0
        if not r.passed:
            self.failures.append(r)
        for name, s in r.stats.items():
            if name == "checks" or "max_abs" not in s:
                continue
            w = self.worst.setdefault(name, {"max_abs": 0.0, "max_rel": 0.0, "rel_fro": 0.0, "cosine": 1.0})
            for k in ("max_abs", "max_rel", "rel_fro"):
                w[k] = _worst(w[k], s[k], max)
            w["cosine"] = _worst(w["cosine"], s["cosine"], min)


def _worst(a: float, b: float, pick) -> float:
    """max/min where NaN wins (Python's max(0.0, nan) is 0.0: a NaN example must not vanish)."""
    return a if a != a else b if b != b else pick(a, b)


def hypothesis_settings(opts: Options):
    from hypothesis import HealthCheck, settings
    from kernelbench.profiles import explore_settings
    import kernelbench.profiles  # noqa: F401  (registers "ci")
    if opts.profile == "explore":
        base = explore_settings(opts.examples)
    elif opts.profile == "ci":
        base = settings(settings.get_profile("ci"), max_examples=opts.examples)
    else:
        raise ValueError(f"unknown hypothesis profile {opts.profile!r}; use explore or ci")
    return settings(base, report_multiple_bugs=False, print_blob=False,
                    suppress_health_check=list(base.suppress_health_check) + [HealthCheck.differing_executors])


def _run_hypothesis(spec, impl, opts: Options, on_result: Callable[[ExampleResult], None]) -> list[str]:
    from hypothesis import given, reporting, strategies as st
    state: dict = {"failed": None, "skipped": 0}
    deadline = time.monotonic() + opts.time_budget_s if opts.time_budget_s else None

    @given(params=spec.strategy(), values=st.sampled_from(spec.value_modes), seed=st.integers(0, 2 ** 31 - 1),
           layout=st.sampled_from(opts.layouts))
    def prop(params, values, seed, layout):
        if deadline and state["failed"] is None and time.monotonic() > deadline:
            state["skipped"] += 1         # out of time: passes without running, reported as skipped
            return
        r = check_example(spec, impl, Example(spec.name, impl.name, params, values, seed, layout), opts.device)
        if not r.passed:
            state["failed"] = r           # the last failing call is hypothesis' final, shrunk example
            raise ExampleError(r)
        if state["failed"] is None:       # shrinking re-runs passing variants: report generation only
            on_result(r)

    # One example-database entry per (op, impl): the default key hashes this function's source.
    set_hypothesis_database_key(prop, f"kernelbench.harness.verify:{spec.name}:{impl.name}".encode())
    prop = hypothesis_settings(opts)(prop)
    messages: list[str] = []
    with hypothesis_shrink_cap(opts.shrink_seconds):    # outside the try: a moved internal is an error
        try:
            with reporting.with_reporter(messages.append):
                prop()
        except ExampleError:
            on_result(state["failed"])
        except Exception as e:  # hypothesis' own errors (flaky failure, unsatisfiable strategy)
            r = state["failed"] or ExampleResult(Example(spec.name, impl.name, {}, "normal", 0), passed=False)
            r.failure = (r.failure + "\n" if r.failure else "") + f"hypothesis stopped: {type(e).__name__}: {e}"
            on_result(r)
    messages = [f"shrinking stopped at the {opts.shrink_seconds:g} s cap (Options.shrink_seconds): the failing example "
                f"shown may not be minimal" if "working to shrink" in m else m for m in messages]
    if state["skipped"]:
        messages.append(f"time budget of {opts.time_budget_s:g} s spent: {state['skipped']} hypothesis examples "
                        f"were not run")
    return messages


def verify_pair(spec, impl, opts: Options, on_result: Callable[[ExampleResult], None] | None = None) -> PairReport:
    """Verify one implementation: the shape set's real cases, then hypothesis examples."""
    from kernelbench.harness.probes import run_probes
    from kernelbench.registry import get_shape_set
    from kernelbench.harness.verify_paths import explicit_default_verdict, verify_paths
    rep = PairReport(spec.name, impl.name, impl.backend)
    reason = skip_reason(impl, opts.device)
    if reason:
        rep.skipped = reason
        return rep

    def emit(r: ExampleResult) -> None:
        rep.add(r)
        if on_result:
            on_result(r)

    if opts.shape_set:
        modes = [v for v in opts.case_values if v in spec.value_modes] or list(spec.value_modes[:1])
        try:
            cases = spec.shape_cases(get_shape_set(opts.shape_set))
        except Exception as e:  # the op spec's bug: visible, not fatal to the run
            cases = []
            emit(ExampleResult(Example(spec.name, impl.name, {}, modes[0], 0, "contiguous", "case"), passed=False,
                               failure=f"OpSpec.cases({opts.shape_set!r}) raised {type(e).__name__}: {e}"))
        if opts.where:
            from kernelbench.harness.bench import matches_where
            cases = [c for c in cases if matches_where(c, opts.where)]
        for params in cases:
            for values in modes:
                emit(check_example(spec, impl, Example(spec.name, impl.name, params, values, 0, "contiguous", "case"),
                                   opts.device))
    if opts.probes and opts.examples > 0:
        run_probes(spec, impl, opts.device, emit)
    if opts.examples > 0:
        rep.notes += _run_hypothesis(spec, impl, opts, emit)
        n = opts.path_examples if opts.path_examples is not None else max(1, opts.examples // 4)
        for mode in EDGE_MODES:       # drawn on purpose, not left to the sampler (unless already failed)
            if mode in spec.value_modes and not rep.failed:
                rep.notes += _run_hypothesis(dataclasses.replace(spec, value_modes=(mode,)), impl,
                                             dataclasses.replace(opts, examples=n), emit)
        rep.paths = verify_paths(spec, impl, opts, emit, n,
                                 lambda s, i, o, e: rep.notes.extend(_run_hypothesis(s, i, o, e)))
        if opts.explicit_default:
            v = explicit_default_verdict(spec, impl, opts.device, emit, opts.shape_set)
            if v is not None:
                rep.paths.append(v)
    return rep


def replay(spec, impl, example: Example, device: str) -> ExampleResult:
    """Check exactly one example (what a reproduction command runs)."""
    from kernelbench.harness.probes import spec_for
    from kernelbench.harness.verify_paths import with_config
    example.source = "replay"
    if example.config is not None:
        impl = with_config(impl, example.config)
    return check_example(spec_for(spec, example.values), impl, example, device)


def select_pairs(op_names: Iterable[str] = (), impl_names: Iterable[str] = ()) -> list[tuple]:
    """The (spec, impl) pairs to verify: every registered op (or those named) and every implementation
    (or those named; an op without any of the named implementations is left out)."""
    from kernelbench import registry
    wanted = set(impl_names)
    pairs = []
    for spec in registry.ops(list(op_names) or None):
        for name, impl in sorted(registry.impls(spec.name).items()):
            if not wanted or name in wanted:
                pairs.append((spec, impl))
    if wanted and not pairs:
        raise LookupError(f"no implementation named {', '.join(sorted(wanted))} among the selected ops")
    return pairs
