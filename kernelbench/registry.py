"""The op registry: one table that verify, tune, bench, roofline, inspect and the decoder all read.

An op (OpSpec) is declared once in kernelbench/ops/<family>.py next to its reference function from
reference/. Implementations (the reference itself, our Triton kernels in kernels/, a user's module)
register against the op's name with `@register_impl`. Adding an op touches three files: the
reference function, the spec, the kernel.

Calling convention shared by every implementation of an op:
    outputs = fn(**inputs)                 # a kernel picks its config (kernelbench.tuned_configs.lookup)
    outputs = fn(**inputs, config=cfg)     # tune/bench pass one config of Impl.configs(params)
`inputs` is the dict that `OpSpec.make_inputs` builds; outputs is a tensor or a tuple of tensors
named by `OpSpec.outputs`. References take no `config`.
"""
from __future__ import annotations

import hashlib
import importlib
import importlib.util
import inspect
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

import torch

from kernelbench.config import ShapeSet, get_shape_set

Params = dict[str, Any]   # one concrete problem: shape letters and scalars, e.g. {"T": 16, "N": 1024, "K": 4096}
Inputs = dict[str, Any]   # keyword arguments of the op's functions

VALUE_MODES = ("normal", "outliers", "tiny", "ties", "large")


@dataclass(frozen=True)
class Tolerance:
    """How an output is compared. exact: bitwise (after NaN-aware equality) for codes, scales, indices.
    Otherwise |out - ref| <= atol + atol_rms * rms(ref) + rtol * |ref| elementwise and
    ||out - ref||_F / ||ref||_F <= rel_fro. `atol_rms` is an absolute floor in the output's own units
    (rms over the reference's finite elements): accumulation error is relative to sum |x_k w_k|, not
    to |y|, so an element that cancels needs a floor that scales with the inputs' magnitude.
    `max_mismatch_frac` lets a fraction of elements break the elementwise bound (quantization codes
    that flip at a rounding boundary); `why` records the error analysis the numbers come from."""
    exact: bool = False
    atol: float = 0.0
    rtol: float = 0.0
    rel_fro: float = float("inf")
    max_mismatch_frac: float = 0.0
    why: str = ""
    atol_rms: float = 0.0


@dataclass(frozen=True)
class Cost:
    """The work an op must do: FLOPs, and the fewest bytes it must move (inputs read once, outputs
    written once). This is the op's roofline."""
    flops: float
    bytes: float

    @property
    def intensity(self) -> float:
        return self.flops / self.bytes if self.bytes else float("inf")


@dataclass
class OpSpec:
    name: str
    family: str
    reference: Callable[..., Any]
    make_inputs: Callable[[Params, torch.Generator, str | torch.device, str], Inputs]
    cases: Callable[[ShapeSet], list[Params]]          # real deployment shapes for a shape set
    strategy: Callable[[], Any]                        # hypothesis strategy of small Params (CPU-sized)
    cost: Callable[[Params], Cost]
    tolerance: Callable[[Params], dict[str, Tolerance]]  # output name -> Tolerance
    outputs: tuple[str, ...]
    inplace: tuple[str, ...] = ()      # inputs the op mutates; they are compared as outputs too
    value_modes: tuple[str, ...] = ("normal",)
    doc: str = ""
    probes: tuple = ()                 # kernelbench.harness.probes.Probe: inputs that make one rule dominate
    # the params key holding the batch (tokens or rows per decode step: "T" or "M"), which bench/tune/inspect
    # --batch select on; None for an op without one (it runs at every --batch)
    batch_key: str | None = None
    # name of the input dict key order for printing reproducible commands; informational
    label: Callable[[Params], str] = field(default=lambda p: ",".join(f"{k}={v}" for k, v in p.items()))
    # (params, inputs in the official layout) -> the Cost of these very inputs, for an op whose work depends on the
    # values and not only on the shape (the MoE ops read the experts their tokens route to; `cost` counts the
    # expected number). Bench times real inputs, so its roofline uses it (timed_cost); list, roofline and scaling,
    # which have no inputs, use `cost`
    instance_cost: Callable[[Params, Inputs], Cost] | None = None
    # the Cost of each packed storage form of the op's inputs (docs/OPS.md "Prepared layouts": an FP8 or FP4 cache)
    # by name: an implementation declaring `form` reads that form (its prepare packs the official inputs), so bench
    # counts these bytes for it instead of `cost`'s (its GB/s, % of copy and roofline floor: what it moves)
    forms: dict[str, Callable[[Params], Cost]] = field(default_factory=dict)

    def form_cost(self, form: str, params: Params) -> Cost:
        """The Cost of packed form `form` (`forms`); a form the op does not declare is an error by name."""
        if form not in self.forms:
            raise RegistryError(f"op {self.name!r} declares no packed form {form!r} (it has: "
                                f"{', '.join(sorted(self.forms)) or 'none'})")
        return self.forms[form](params)

    def shape_cases(self, shape_set: str | ShapeSet) -> list[Params]:
        ss = get_shape_set(shape_set) if isinstance(shape_set, str) else shape_set
        return self.cases(ss)

    def timed_cost(self, params: Params, input_sets: list[Inputs], weights: list[int] | None = None) -> Cost:
        """The Cost of a run that rotates over `input_sets` (set i timed `weights[i]` times, default once each):
        the weighted mean of their instance costs, or the shape's `cost` for an op whose cost does not depend on
        the values."""
        if self.instance_cost is None or not input_sets:
            return self.cost(params)
        weights = weights or [1] * len(input_sets)
        costs = [self.instance_cost(params, s) for s in input_sets]
        n = sum(weights)
        return Cost(flops=sum(w * c.flops for w, c in zip(weights, costs)) / n,
                    bytes=sum(w * c.bytes for w, c in zip(weights, costs)) / n)

    def batch(self, params: Params) -> int | None:
        """The batch of a case (params[batch_key]); None when the op declares no batch key."""
        value = params.get(self.batch_key) if self.batch_key else None
        return value if isinstance(value, int) else None


@dataclass
class Impl:
    op: str
    name: str
    fn: Callable[..., Any]
    configs: Callable[[Params], list[dict]] | None = None   # the tuning space for a problem
    default_config: Callable[[Params], dict] | None = None  # what runs when nothing was tuned
    deterministic: bool = True
    backend: str = "torch"          # "torch" (runs anywhere) or "triton" (GPU, or the interpreter on CPU)
    source: str = ""                # module the implementation came from
    kernels: Callable[[], list] | None = None  # the @triton.jit functions, for the sm_120 inspector
    # config -> why it cannot run in the interpreter (compiled-only paths) beyond the inline-PTX "_asm" values that
    # verify_paths.compiled_only recognises by itself, or None
    compiled_only: Callable[[dict], str | None] | None = None
    # (config, shape params) -> why its kernels run without tensor cores by design (e.g. an FMA GEMV at one row), or
    # None: the sm_120 inspector then does not require tensor-core instructions for that case of a TENSOR_CORE_OPS op
    simt: Callable[[dict, dict], str | None] | None = None
    # the load-time weight layout (docs/OPS.md "Prepared layouts"): inputs in the official layout -> the inputs this
    # implementation runs fastest on, computed once per weight (the model at load, bench/tune before timing, verify
    # before the call: the pair reference(official) vs fn(prepare(official)) is what verify checks)
    prepare: Callable[[Inputs], Inputs] | None = None
    # the packed storage form its prepare makes (a name in the op's `forms`): bench counts that form's bytes
    form: str | None = None
    # config keys the kernels take beyond those the space and the default show at the op's cases (knobs reachable
    # only by an explicit config, e.g. a register cap): KERNELBENCH_PIN_CONFIG and tuned files may name them
    options: frozenset = frozenset()

    def prepared(self, inputs: Inputs) -> Inputs:
        return self.prepare(inputs) if self.prepare is not None else inputs

    @property
    def source_hash(self) -> str:
        try:
            mod = sys.modules[self.fn.__module__]
            text = inspect.getsource(mod)
        except (KeyError, OSError, TypeError):
            text = self.fn.__qualname__
        return hashlib.sha256(text.encode()).hexdigest()[:16]


class RegistryError(LookupError):
    pass


_OPS: dict[str, OpSpec] = {}
_IMPLS: dict[str, dict[str, Impl]] = {}


def register_op(spec: OpSpec) -> OpSpec:
    if spec.name in _OPS and _OPS[spec.name] is not spec:
        raise RegistryError(f"op {spec.name!r} is registered twice")
    _OPS[spec.name] = spec
    _IMPLS.setdefault(spec.name, {})["reference"] = Impl(spec.name, "reference", spec.reference,
                                                          source=spec.reference.__module__)
    return spec


def _origin(fn) -> tuple:
    code = getattr(fn, "__code__", None)
    return (fn.__module__, fn.__qualname__, getattr(code, "co_filename", None), getattr(code, "co_firstlineno", None))


def register_impl(op: str, name: str, *, replace: bool = False, **kwargs) -> Callable:
    """Decorator: register `fn` as implementation `name` of `op`."""
    def wrap(fn):
        impls = _IMPLS.setdefault(op, {})
        old = impls.get(name)
        reloaded = old is not None and _origin(old.fn) == _origin(fn)   # the same module imported again
        if old is not None and not replace and old.fn is not fn and not reloaded:
            raise RegistryError(f"implementation {name!r} of op {op!r} is registered twice")
        impls[name] = Impl(op, name, fn, source=fn.__module__, **kwargs)
        return fn
    return wrap


def unregister_impl(op: str, name: str) -> None:
    _IMPLS.get(op, {}).pop(name, None)


def unregister_op(name: str) -> None:
    """Remove an op and all its implementations (tests register temporary toy ops)."""
    _OPS.pop(name, None)
    _IMPLS.pop(name, None)


_LOAD_LAST = ("probes",)   # ops/probes.py attaches probes to the specs every other ops module registers
_loaded = False


def builtin_modules(package: str) -> list[str]:
    """The modules of an in-tree package (kernelbench.ops or kernelbench.kernels), discovered rather than
    listed: a new op family is a new file. Sorted by name, the _LOAD_LAST ones at the end."""
    import pkgutil
    pkg = importlib.import_module(package)
    names = sorted(m.name for m in pkgutil.iter_modules(pkg.__path__) if not m.ispkg)
    return [f"{package}.{n}" for n in sorted(names, key=lambda n: n in _LOAD_LAST)]


def load_builtin() -> None:
    """Import every op spec and every in-tree kernel module (each registers itself)."""
    global _loaded
    if _loaded:
        return
    _loaded = True
    for package in ("kernelbench.ops", "kernelbench.kernels"):
        for module in builtin_modules(package):
            importlib.import_module(module)


def load_module(path_or_name: str) -> None:
    """Import a user's kernel module (a file path or a dotted module name); it registers its impls."""
    p = Path(path_or_name)
    if p.suffix == ".py" or p.exists():
        if not p.exists():
            raise FileNotFoundError(f"kernel module {p} does not exist")
        mod_name = f"kernelbench_user_{p.stem}_{hashlib.sha1(str(p.resolve()).encode()).hexdigest()[:8]}"
        spec = importlib.util.spec_from_file_location(mod_name, p)
        module = importlib.util.module_from_spec(spec)
        sys.modules[mod_name] = module
        spec.loader.exec_module(module)
    else:
        importlib.import_module(path_or_name)


def ops(names: Iterable[str] | None = None) -> list[OpSpec]:
    load_builtin()
    if not names:
        return [_OPS[k] for k in sorted(_OPS)]
    out = []
    for n in names:
        out.append(get_op(n))
    return out


def get_op(name: str) -> OpSpec:
    load_builtin()
    try:
        return _OPS[name]
    except KeyError:
        raise RegistryError(f"unknown op {name!r}; known ops: {', '.join(sorted(_OPS))}") from None


def impls(op: str) -> dict[str, Impl]:
    get_op(op)
    return dict(_IMPLS.get(op, {}))


def get_impl(op: str, name: str) -> Impl:
    found = impls(op)
    try:
        return found[name]
    except KeyError:
        raise RegistryError(f"op {op!r} has no implementation {name!r}; it has: {', '.join(sorted(found))}") from None
