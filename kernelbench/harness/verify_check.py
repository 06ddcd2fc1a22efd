"""Checking one example: an implementation against the fp64 reference on one drawn input.

`check_example(spec, impl, example, device)` does, for one (params, value mode, seed, layout):
1. builds the inputs with `spec.make_inputs(params, torch.Generator().manual_seed(seed), device, values)`;
2. runs the reference on its own copy under `compute_dtype(torch.float64)`;
3. runs the implementation on another copy, every `torch.empty*` it calls filled with poison (NaN,
   or an integer sentinel): an output element it never writes shows up as poison where the reference
   has a value. In-place targets (`spec.inplace`) are not poisoned; they are compared as outputs;
4. checks: outputs have the reference's shape and dtype; each output within `spec.tolerance(params)`
   (exact ones bit for bit); inputs other than the in-place targets unchanged bit for bit; and, when
   `impl.deterministic`, a second run on fresh copies identical bit for bit.

Layout "strided" hands the implementation inputs that are views into wider, poisoned buffers (same
values, non-unit row strides). A kernel must then compute the right answer or refuse clearly
(ValueError/TypeError/NotImplementedError, or an error that names contiguity or strides): a
refusal passes and is counted as "rejected"; reading the buffer as if it were contiguous fails.
"""
from __future__ import annotations

import contextlib
import json
import shlex
import time
import traceback
from dataclasses import dataclass, field, replace
from typing import Any

import torch

from kernelbench.reference.precision import compute_dtype
from kernelbench.registry import Impl, OpSpec, Tolerance
from kernelbench.harness.testing import error_stats, explain, passes, poison_
from kernelbench.harness.timing import sync

LAYOUTS = ("contiguous", "strided")
_REJECT_TYPES = (ValueError, TypeError, NotImplementedError)
_REJECT_WORDS = ("contiguous", "stride")


@dataclass
class Example:
    """One verification example; `repro()` is the command that replays exactly it."""
    op: str
    impl: str
    params: dict
    values: str = "normal"
    seed: int = 0
    layout: str = "contiguous"
    source: str = "hypothesis"       # "case" (a real shape of the shape set), "hypothesis", "replay", "probe"
    config: dict | None = None       # the config the implementation was called with (None: its own choice)

    def repro(self, device: str = "cpu", kernel_modules: tuple[str, ...] = ()) -> str:
        from kernelbench.tuned_configs import env_settings
        params = json.dumps(self.params, sort_keys=True, separators=(",", ":"))
        env = "".join(f"{k}={shlex.quote(v)} " for k, v in env_settings().items())   # pinned / tuned configs
        cmd = (f"{env}kernelbench verify {self.op} --impl {self.impl} --params '{params}' --values {self.values} "
               f"--seed {self.seed} --device {device}")
        if self.layout != "contiguous":
            cmd += f" --layout {self.layout}"
        if self.config is not None:
            cmd += f" --config '{json.dumps(self.config, sort_keys=True, separators=(',', ':'))}'"
        for m in kernel_modules:
            cmd += f" --kernel-module {m}"
        return cmd


@dataclass
class ExampleResult:
    example: Example
    passed: bool
    stats: dict = field(default_factory=dict)   # output name -> error statistics; "checks" -> other checks
    failure: str = ""
    elapsed_s: float = 0.0
    rejected: str = ""                          # why the implementation refused a strided layout

    def short(self) -> str:
        return self.failure.strip().splitlines()[0] if self.failure else ("rejected: " + self.rejected if self.rejected else "ok")


class ExampleError(Exception):
    """Raised inside hypothesis for a failing example; carries the result."""

    def __init__(self, result: ExampleResult):
        super().__init__(result.failure)
        self.result = result


# ---- poisoning -------------------------------------------------------------------------------------
_ALLOCATORS = (("torch", "empty"), ("torch", "empty_like"), ("torch", "empty_strided"), ("Tensor", "new_empty"))


def _poisoning(fn):
    def wrapped(*args, **kwargs):
        t = fn(*args, **kwargs)
        if isinstance(t, torch.Tensor) and not t.is_complex() and t.numel():
            poison_(t)
        return t
    wrapped.__wrapped__ = fn
    return wrapped


@contextlib.contextmanager
def poisoned_allocations():
    """While active, every torch.empty / empty_like / empty_strided / Tensor.new_empty result is
    filled with poison (testing.poison_): a kernel's unwritten output elements stay poison."""
    saved = []
    for owner_name, attr in _ALLOCATORS:
        owner = torch if owner_name == "torch" else torch.Tensor
        orig = getattr(owner, attr)
        saved.append((owner, attr, orig))
        setattr(owner, attr, _poisoning(orig))
    try:
        yield
    finally:
        for owner, attr, orig in reversed(saved):
            setattr(owner, attr, orig)


def poison_like(t: torch.Tensor) -> torch.Tensor:
    return poison_(torch.empty(t.shape, dtype=t.dtype, device=t.device))


# ---- copies and layouts -----------------------------------------------------------------------------
def _strided_copy(t: torch.Tensor) -> torch.Tensor:
    """The same values as a view into a wider buffer whose padding is poison: rows (last dim) padded
    by 16 elements for 2-D and up, every other element for 1-D."""
    if t.dim() == 0 or t.numel() == 0:
        return t.clone()
    if t.dim() == 1:
        buf = poison_(torch.empty((t.shape[0] * 2,), dtype=t.dtype, device=t.device))
        view = buf[::2]
    else:
        buf = poison_(torch.empty(tuple(t.shape[:-1]) + (t.shape[-1] + 16,), dtype=t.dtype, device=t.device))
        view = buf[..., : t.shape[-1]]
    view.copy_(t)
    return view


def exact_copy(t: torch.Tensor) -> torch.Tensor:
    """A copy with the same sizes, strides and storage offset (a view the op spec made stays a view)."""
    if t.is_contiguous():
        return t.clone()
    copy = torch.tensor([], dtype=t.dtype, device=t.device)
    return copy.set_(t.untyped_storage().clone(), t.storage_offset(), t.size(), t.stride())


def materialize(inputs: dict, layout: str = "contiguous", keep: tuple[str, ...] = ()) -> dict:
    """Fresh copies of every tensor input (other values shared). "contiguous" keeps the layout the op
    spec made (contiguous in practice); "strided" makes every input but `keep` a padded view."""
    if layout not in LAYOUTS:
        raise ValueError(f"unknown layout {layout!r}; known: {', '.join(LAYOUTS)}")
    out = {}
    for k, v in inputs.items():
        if isinstance(v, torch.Tensor):
            out[k] = _strided_copy(v) if layout == "strided" and k not in keep else exact_copy(v)
        else:
            out[k] = v
    return out


def _bytes(t: torch.Tensor) -> torch.Tensor:
    """The raw bytes of `t` in logical element order (a dense copy: views may have any strides)."""
    flat = torch.empty((t.numel(),), dtype=t.dtype, device=t.device).copy_(t.detach().reshape(-1))
    return flat.view(torch.uint8)


def same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.shape == b.shape and a.dtype == b.dtype and torch.equal(_bytes(a), _bytes(b))


def differing_elements(a: torch.Tensor, b: torch.Tensor) -> int:
    """Elements whose bits differ (same shape and dtype)."""
    size = a.element_size()
    return int((_bytes(a).view(-1, size) != _bytes(b).view(-1, size)).any(dim=1).sum())


def unwritten_elements(out: torch.Tensor, ref: torch.Tensor) -> int:
    """Elements of `out` that still hold the poison pattern where the reference holds something else."""
    if out.shape != ref.shape or out.dtype != ref.dtype or out.numel() == 0:
        return 0
    size = out.element_size()
    p = _bytes(poison_like(out)).view(-1, size)
    o, r = _bytes(out).view(-1, size), _bytes(ref).view(-1, size)
    return int(((o == p).all(dim=1) & ~(r == p).all(dim=1)).sum())


def as_tuple(outputs: Any) -> tuple:
    return tuple(outputs) if isinstance(outputs, (tuple, list)) else (outputs,)


def _error_text(e: BaseException) -> str:
    tb = traceback.extract_tb(e.__traceback__)[-3:]
    where = "; ".join(f"{f.filename.rsplit('/', 1)[-1]}:{f.lineno} in {f.name}" for f in tb)
    return f"{type(e).__name__}: {e} (at {where})"


def _is_rejection(e: BaseException) -> bool:
    msg = str(e).lower()
    return isinstance(e, _REJECT_TYPES) or any(w in msg for w in _REJECT_WORDS)


# ---- the check ------------------------------------------------------------------------------------
def _compare(name: str, out: Any, ref: Any, tol: Tolerance | None, stats: dict, problems: list[str]) -> None:
    if tol is None:
        problems.append(f"output {name!r}: the op spec gives no tolerance for it (OpSpec.tolerance must name "
                        f"every output and in-place input)")
        return
    if not isinstance(ref, torch.Tensor):
        if out != ref:
            problems.append(f"output {name!r}: got {out!r}, expected {ref!r}")
        stats[name] = {"passed": out == ref}
        return
    if not isinstance(out, torch.Tensor):
        problems.append(f"output {name!r}: got {type(out).__name__}, expected a tensor")
        return
    if out.shape != ref.shape:
        problems.append(f"output {name!r}: shape {tuple(out.shape)}, expected {tuple(ref.shape)}")
        stats[name] = {"passed": False, "shape": list(out.shape)}
        return
    dtype_ok = out.dtype == ref.dtype or (ref.dtype == torch.float64 and out.dtype == torch.float32)
    if not dtype_ok:
        problems.append(f"output {name!r}: dtype {out.dtype}, expected {ref.dtype}")
        stats[name] = {"passed": False, "dtype": str(out.dtype)}
        return
    out_c, ref_c = out.detach().cpu(), ref.detach().cpu()
    if out.device != ref.device:
        problems.append(f"output {name!r}: on {out.device}, inputs were on {ref.device}")
    unwritten = unwritten_elements(out_c, ref_c) if out.dtype == ref.dtype else 0
    st = error_stats(out_c, ref_c, tol)
    ok = passes(st, tol) and not unwritten
    d = st.as_dict()
    d.update(passed=ok, unwritten=unwritten, dtype=str(out.dtype))
    stats[name] = d
    if not ok:
        text = explain(name, st, tol, out_c, ref_c)
        if unwritten:
            text += f"\n  {unwritten} elements {_NEVER_WRITTEN}"
        elif st.nan_mismatch:
            text += f"\n  {_NAN_MADE}"
        problems.append(text)


def check_example(spec: OpSpec, impl: Impl, ex: Example, device: str = "cpu") -> ExampleResult:
    """Verify `impl` on one example; never raises for a wrong or crashing implementation."""
    t0 = time.perf_counter()
    res = ExampleResult(ex, passed=False)
    try:
        base = spec.make_inputs(dict(ex.params), torch.Generator().manual_seed(ex.seed), device, ex.values)
    except Exception as e:  # a bug in the op spec, or params its strategy should not draw
        res.failure = f"make_inputs failed (the op spec, not the implementation): {_error_text(e)}"
        return _done(res, t0)
    try:
        tols = spec.tolerance(ex.params)
        ref_in = materialize(base)
        with compute_dtype(torch.float64):
            ref_out = as_tuple(spec.reference(**ref_in))
        sync(device)
    except Exception as e:
        res.failure = f"the reference raised (the op spec or reference, not the implementation): {_error_text(e)}"
        return _done(res, t0)

    run_in = materialize(base, ex.layout, keep=spec.inplace)
    try:
        with poisoned_allocations():
            out = as_tuple(impl.fn(**impl.prepared(run_in)))
        sync(device)
    except Exception as e:
        if ex.layout == "strided" and _is_rejection(e):
            res.passed, res.rejected = True, f"{type(e).__name__}: {e}"
            res.stats = {"checks": {"rejected": res.rejected}}
            return _done(res, t0)
        res.failure = f"the implementation raised {_error_text(e)}"
        return _done(res, t0)

    try:
        _judge(spec, impl, ex, base, ref_in, ref_out, run_in, out, tols, res)
        if not res.passed and ex.layout == "strided" and (_NEVER_WRITTEN in res.failure or _NAN_MADE in res.failure):
            _diagnose_poison_source(spec, impl, ex, base, ref_in, ref_out, tols, res)
    except Exception as e:  # a bug in verify itself must not pass an example
        res.passed, res.failure = False, f"verify could not compare the outputs: {_error_text(e)}"
    return _done(res, t0)


_NEVER_WRITTEN = "still hold the poison written before the launch: never written"
_NAN_MADE = "NaN where the reference has none: unwritten (outputs are NaN-poisoned) or a NaN produced"
_STRIDE_GAPS = ("poison read from the padding between the rows of the strided inputs: the same example with "
                "contiguous inputs passes, so the implementation ignores its inputs' strides (it must honour them, "
                "or refuse non-contiguous inputs with a ValueError)")


def _diagnose_poison_source(spec, impl, ex, base, ref_in, ref_out, tols, res: ExampleResult) -> None:
    """Poison in a strided run's outputs is either never written or read from the inputs' poisoned
    stride gaps; rerunning the example on contiguous inputs tells them apart."""
    again = ExampleResult(ex, passed=False)
    run_in = materialize(base, "contiguous", keep=spec.inplace)
    try:
        with poisoned_allocations():
            out = as_tuple(impl.fn(**run_in))
        _judge(spec, replace(impl, deterministic=False), ex, base, ref_in, ref_out, run_in, out, tols, again)
    except Exception:  # noqa: BLE001 - no diagnosis: the original message stands
        return
    if again.passed:
        res.failure = (res.failure.replace(_NEVER_WRITTEN, "hold NaN: " + _STRIDE_GAPS)
                       .replace(_NAN_MADE, "NaN: " + _STRIDE_GAPS))
    else:
        res.failure = res.failure.replace(_NAN_MADE, "NaN where the reference has none; the same example with "
                                                     "contiguous inputs fails too (not a stride problem)")


def _judge(spec, impl, ex, base, ref_in, ref_out, run_in, out, tols, res: ExampleResult) -> None:
    problems: list[str] = []
    stats: dict = {}
    if len(out) != len(spec.outputs):
        problems.append(f"returned {len(out)} outputs, the op has {len(spec.outputs)} ({', '.join(spec.outputs)})")
    for name, o, r in zip(spec.outputs, out, ref_out):
        _compare(name, o, r, tols.get(name), stats, problems)
    for name in spec.inplace:
        _compare(name, run_in[name], ref_in[name], tols.get(name), stats, problems)

    checks = {"inputs_unmodified": True, "deterministic": None}
    for name, v in base.items():
        if isinstance(v, torch.Tensor) and name not in spec.inplace:
            if not same_bits(run_in[name], v):
                checks["inputs_unmodified"] = False
                problems.append(f"input {name!r} was modified by the implementation "
                                f"({differing_elements(run_in[name].contiguous(), v)} elements differ); "
                                f"the op is not in place for it")
    if impl.deterministic and not problems:
        checks["deterministic"] = _second_run_same(spec, impl, base, ex, out, run_in, problems)
    stats["checks"] = checks
    res.stats, res.passed = stats, not problems
    res.failure = "\n".join(problems)


def _second_run_same(spec: OpSpec, impl: Impl, base: dict, ex: Example, first: tuple, first_in: dict,
                     problems: list[str]) -> bool:
    """Run again on fresh copies; outputs and in-place targets must match the first run bit for bit."""
    again_in = materialize(base, ex.layout, keep=spec.inplace)
    try:
        with poisoned_allocations():
            again = as_tuple(impl.fn(**impl.prepared(again_in)))
    except Exception as e:
        problems.append(f"the second run (determinism check) raised {_error_text(e)}")
        return False
    pairs = list(zip(spec.outputs, first, again)) + [(n, first_in[n], again_in[n]) for n in spec.inplace]
    same = True
    for name, a, b in pairs:
        if isinstance(a, torch.Tensor) and not same_bits(a, b):
            same = False
            n = differing_elements(a, b) if a.shape == b.shape and a.dtype == b.dtype else "all"
            problems.append(f"output {name!r} differs between two runs on the same input ({n} elements) but the "
                            f"implementation is registered deterministic=True")
    return same


def _done(res: ExampleResult, t0: float) -> ExampleResult:
    res.elapsed_s = time.perf_counter() - t0
    return res
