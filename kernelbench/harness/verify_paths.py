"""Which configs of an implementation `verify` runs: every code path, not only today's default.

For an implementation with a config space (`Impl.configs`), the paths are
  * "default": the config the kernel picks itself (its default, or a tuned entry on this device);
  * every config the shipped tuned table (kernelbench/tuned/v1.json) holds for the op: what a lookup on
    sm_90 or sm_120 can select (a GPU lookup borrows other devices' entries; see tuned_configs.lookup);
  * a covering set of the config space: for each value of every categorical option (non-numeric
    values, e.g. DECODE "bf16" / "fp8" / "fp8_asm") and each end of every structural count
    (`STRUCTURAL`: split-K and top-k segment counts, sparse attention's combine column blocks, the indexer
    top-k's held rows (ROW_REGS: 0 the radix select, a count the held select beside it, "auto" held-only where the
    cache allows; a space mixing words and counts covers every value): a kernel path each, whole or split, off or
    on), the
    config of the space nearest the default that
    has it. Not the full product: one config per value.
The default is evaluated at a representative problem (the op's first "tiny" shape case), the space is
the union of the spaces at every "tiny" case (an option that exists only at some shapes, e.g. the MMA
tiles' X_OPERAND above one row, is covered too); the paths are generic over `Impl.configs`, so a kernel's
changed space changes its paths.

A path that only runs compiled (inline PTX; the interpreter substitutes another path) is "not
verified here" on CPU, never a pass: `Impl.compiled_only(config)` says why, or, when a kernel does
not declare it, a categorical value ending in "_asm" (the project's naming for inline-PTX variants).
`kernelbench verify --device cuda` runs those paths.

`path_key(impl, config)` projects a config onto its path options: the tuner's export requires a
passing verification of the exported config's path on that device (`verified_paths`).
"""
from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field

STRUCTURAL = ("SPLIT", "SEGMENTS", "COMBINE_COLS", "ROW_REGS")
NOT_HERE = "not verified here"


@dataclass
class Path:
    config: dict | None            # None: the kernel's own choice (default or tuned lookup)
    why: list[str] = field(default_factory=list)
    compiled_only: str = ""        # why it cannot run in the interpreter

    @property
    def label(self) -> str:
        return "default" if self.config is None else json.dumps(self.config, sort_keys=True, separators=(",", ":"))


def _numeric(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def path_options(configs: list[dict]) -> dict[str, list]:
    """Option -> the values to cover: every value of a categorical option, both ends of a structural count."""
    out: dict[str, list] = {}
    keys = sorted({k for c in configs for k in c})
    for k in keys:
        vals = []
        for c in configs:
            if k in c and c[k] not in vals:
                vals.append(c[k])
        if not all(_numeric(v) for v in vals):
            out[k] = vals
        elif k in STRUCTURAL and len(vals) > 1:
            out[k] = [min(vals), max(vals)]
    return out


def path_key(impl, config: dict, params: dict | None = None) -> dict:
    """The path a config takes: its categorical options (and structural counts collapsed to 1 / >1)."""
    space = (impl.configs(params) if params is not None else config_space(impl)) if impl.configs else []
    key = {}
    for k in path_options(space):
        v = config.get(k)
        key[k] = (v > 1) if (k in STRUCTURAL and _numeric(v)) else v
    return key


def compiled_only(impl, config: dict) -> str:
    """Why `config` runs compiled only ("" when the interpreter runs it): a categorical value ending in "_asm"
    (inline PTX), and the implementation's own reasons (`Impl.compiled_only`), joined."""
    why = [f"{k}={v} is inline PTX: it runs compiled only (the interpreter substitutes another path)"
           for k, v in config.items() if isinstance(v, str) and v.endswith("_asm")][:1]
    if impl.compiled_only is not None:
        why.append(impl.compiled_only(config) or "")
    return "; ".join(w for w in why if w)


def representative_params(impl) -> dict:
    from kernelbench import registry
    spec = registry.get_op(impl.op)
    cases = spec.shape_cases("tiny")
    return dict(cases[0]) if cases else {}


def config_space(impl) -> list[dict]:
    """The union of `impl`'s config spaces at the op's "tiny" cases (the representative problem alone when the op
    has none), without repeats, in first-seen order."""
    from kernelbench import registry
    cases = registry.get_op(impl.op).shape_cases("tiny") or [representative_params(impl)]
    out, seen = [], set()
    for p in cases:
        for c in impl.configs(dict(p)):
            k = _canon(c)
            if k not in seen:
                seen.add(k)
                out.append(c)
    return out


def tuned_configs(op: str) -> list[tuple[dict, str]]:
    from kernelbench.tuned_configs import entries
    out = []
    for e in entries():
        if e["op"] == op:
            out.append((e["config"], f"tuned for {e.get('device')} at {json.dumps(e['key'], sort_keys=True)}"))
    return out


def _distance(a: dict, b: dict) -> int:
    return sum(1 for k in set(a) | set(b) if a.get(k) != b.get(k))


def select_paths(impl, params: dict | None = None) -> list[Path]:
    """The paths to verify for `impl` (one, the default, for an implementation without a config space)."""
    if impl.configs is None or impl.default_config is None:
        return [Path(None, ["default (no config space)"])]
    rep = params if params is not None else representative_params(impl)
    space = impl.configs(rep) if params is not None else config_space(impl)
    default = impl.default_config(rep)
    paths = [Path(None, ["default on cpu, and on sm_90 / sm_120 where nothing is tuned"])]
    seen = {_canon(default): paths[0]}
    for cfg, why in tuned_configs(impl.op):
        full = {**default, **cfg}
        p = seen.get(_canon(full))
        if p is None:
            p = seen[_canon(full)] = Path(full)
            paths.append(p)
        p.why.append(why)
    for pick, why in covering_configs(space, default, [p.config for p in paths[1:]]):
        p = seen.get(_canon(pick))
        if p is None:
            p = seen[_canon(pick)] = Path(dict(pick))
            paths.append(p)
        p.why.append(why)
    for p in paths:
        p.compiled_only = compiled_only(impl, p.config if p.config is not None else default)
    return paths


def covering_configs(space: list[dict], default: dict, have=(),
                     categorical_only: bool = False) -> list[tuple[dict, str]]:
    """(config, why) for every path option value (path_options; with categorical_only, the non-numeric options
    only) that neither `default` nor a config of `have` takes: the config of `space` nearest `default` with it."""
    covered = [default, *have]
    out: list[tuple[dict, str]] = []
    for opt, values in path_options(space).items():
        if categorical_only and opt in STRUCTURAL:
            continue
        for v in values:
            if any(c.get(opt) == v for c in covered):
                continue
            pick = min((c for c in space if c.get(opt) == v), key=lambda c: _distance(c, default))
            if all(_canon(pick) != _canon(c) for c in covered):
                covered.append(pick)
            out.append((pick, f"covers {opt}={v}"))
    return out


def _canon(c: dict) -> str:
    return json.dumps(c, sort_keys=True, default=str)


def with_config(impl, config: dict):
    """The implementation with `config` passed on every call (what one path runs)."""
    fn = impl.fn

    def run(*args, **kwargs):
        return fn(*args, **kwargs, config=dict(config))
    run.__wrapped__ = fn
    return dataclasses.replace(impl, fn=run)


@dataclass
class PathVerdict:
    config: dict | None
    label: str
    why: list[str]
    status: str = "pass"           # pass, FAIL, not verified here, skipped
    examples: int = 0
    failed: int = 0
    reason: str = ""

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


EXPLICIT_DEFAULT = "explicit default"


def explicit_default_verdict(spec, impl, device: str, emit, shape_set: str | None = None,
                             cases: list[dict] | None = None) -> PathVerdict | None:
    """The default passed as a config must run what no config runs, bit for bit, at every case of `shape_set` (verify
    --shapes; else the op's "tiny" cases, or `cases`), one result emitted per case. Tune's first trial, sm_120's inspection and the config paths pass the default
    explicitly; the decoder passes none. A wrapper that picks other kernels when `config is None` made them differ:
    tune and inspect judged kernels the step did not run, and a tuned entry merged into the other kernels' config
    (session 22, mHC at 5-16 tokens). The no-config call runs with every lookup of the op answering its default (a
    trial pin without keys: tuned entries and KERNELBENCH_PIN_CONFIG out of the way). None for an implementation
    without a config space; skipped for one not declared deterministic, and on the CPU for a compiled-only default."""
    import torch
    from kernelbench import tuned_configs as tc
    from kernelbench.harness.timing import sync
    from kernelbench.harness.verify_check import Example, ExampleResult, as_tuple, materialize
    if impl.configs is None or impl.default_config is None:
        return None
    v = PathVerdict(None, EXPLICIT_DEFAULT, ["the default given as a config runs what no config runs, bit for bit"])
    if not impl.deterministic:
        v.status, v.reason = "skipped", "not declared deterministic: two runs need not agree bit for bit"
        return v
    if cases is None:
        cases = [dict(c) for c in spec.shape_cases(shape_set or "tiny")]
    for params in cases or [representative_params(impl)]:
        default = impl.default_config(dict(params))
        if device == "cpu" and compiled_only(impl, default):
            v.status, v.reason = NOT_HERE, compiled_only(impl, default) + "; `kernelbench verify --device cuda` runs it"
            return v
        ex = Example(spec.name, impl.name, dict(params), "normal", 0, "contiguous", "case")
        ex.config = dict(default)
        r = ExampleResult(ex, passed=False)
        try:
            base = spec.make_inputs(dict(params), torch.Generator().manual_seed(0), device, "normal")
            with tc.pins_applied([tc.Pin(spec.name, {})]):
                implicit = as_tuple(impl.fn(**impl.prepared(materialize(base, keep=spec.inplace))))
            explicit = as_tuple(impl.fn(**impl.prepared(materialize(base, keep=spec.inplace)), config=dict(default)))
            sync(device)
            differ = [name for name, a, b in zip(spec.outputs, implicit, explicit) if not _same_bits(a, b)]
            r.passed = not differ
            r.failure = "" if r.passed else (
                f"{EXPLICIT_DEFAULT}: at {params} the output(s) {', '.join(differ)} differ bit for bit between the "
                f"call with no config and the call given its default {_canon(default)}: the wrapper runs other code "
                f"when config is None, so tune's first trial and sm_120's inspection are not of what runs")
        except Exception as e:  # a crash of either call is a failure of this check, shown with its reason
            r.failure = f"{EXPLICIT_DEFAULT}: at {params}: {type(e).__name__}: {str(e).splitlines()[0][:200]}"
        r.stats = {"checks": {"config": dict(default), "explicit_default": r.passed}}
        v.examples += 1
        v.failed += 0 if r.passed else 1
        emit(r)
    v.status = "FAIL" if v.failed else "pass"
    return v


def _same_bits(a, b) -> bool:
    """Equal shape, dtype and bytes (NaN payloads included: torch.equal calls NaN unequal to itself)."""
    import torch
    if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)):
        return a == b
    return a.shape == b.shape and a.dtype == b.dtype and torch.equal(
        a.contiguous().reshape(-1).view(torch.uint8), b.contiguous().reshape(-1).view(torch.uint8))


def verify_paths(spec, impl, opts, emit, path_examples: int, run_one) -> list[PathVerdict]:
    """Run every non-default path of `impl`: its probes, then `path_examples` hypothesis examples.
    `run_one(spec, impl, opts, emit)` runs the random examples (verify._run_hypothesis); `emit` records.
    The default path is verified by the caller (verify_pair)."""
    from kernelbench.harness.probes import run_probes
    verdicts = []
    try:
        paths = select_paths(impl)
    except Exception as e:  # a broken config space is the implementation's bug: visible, not fatal
        from kernelbench.harness.verify_check import Example, ExampleResult
        why = f"selecting the config paths (Impl.configs / default_config) raised {type(e).__name__}: {e}"
        emit(ExampleResult(Example(spec.name, impl.name, {}, "normal", 0, "contiguous", "case"), passed=False,
                           failure=why))
        return [PathVerdict(None, "config space", [], "FAIL", 1, 1, why)]
    for path in paths[1:]:
        v = PathVerdict(path.config, path.label, path.why)
        verdicts.append(v)
        if path.compiled_only and opts.device == "cpu":
            v.status, v.reason = NOT_HERE, path.compiled_only + "; `kernelbench verify --device cuda` runs it"
            continue
        cimpl = with_config(impl, path.config)

        def tagged(r, _v=v, _cfg=path.config):
            r.example.config = dict(_cfg)
            r.stats.setdefault("checks", {})["config"] = dict(_cfg)
            _v.examples += 1
            _v.failed += 0 if r.passed else 1
            emit(r)
        run_probes(spec, cimpl, opts.device, tagged)
        if path_examples > 0:
            popts = dataclasses.replace(opts, examples=path_examples)
            run_one(spec, cimpl, popts, tagged)
        v.status = "FAIL" if v.failed else "pass"
    return verdicts


def verified_paths(store, op: str, impl: str, device_kind: str, device_name: str | None = None) -> list[dict]:
    """The path keys with a passing verification of (op, impl) on a device, from the results database:
    per verify run, a config whose examples all passed. device_kind: "cpu" or "cuda"; device_name,
    when given, must match the run environment's GPU name."""
    from kernelbench import registry
    impl_obj = registry.get_impl(op, impl)
    per_run: dict[tuple, bool] = {}
    for v in store.verify_outcomes(op=op, impl=impl, source_hash=impl_obj.source_hash, device=device_kind):
        run_id, passed, stats = v["run_id"], v["passed"], v["stats"]
        if device_name and v["gpu_name"] != device_name:
            continue
        cfg = ((stats or {}).get("checks") or {}).get("config")
        if cfg is None and impl_obj.default_config is not None:    # the default path: its representative config
            cfg = impl_obj.default_config(representative_params(impl_obj))
        key = json.dumps(path_key(impl_obj, cfg) if cfg is not None else {}, sort_keys=True)
        k = (run_id, key)
        per_run[k] = per_run.get(k, True) and bool(passed)
    out = []
    for (run_id, key), ok in per_run.items():
        if ok and json.loads(key) not in out:
            out.append(json.loads(key))
    return out


class UnverifiedPath(ValueError):
    pass


def require_verified(store, op: str, impl: str, device: str, config: dict) -> None:
    """Refuse (UnverifiedPath) a config whose path has no passing verification of (op, impl) on `device`
    (a torch device name, or "cpu") in the results database."""
    from kernelbench import registry
    kind, name = ("cpu", None) if device == "cpu" else ("cuda", device)
    want = path_key(registry.get_impl(op, impl), config)
    if want not in verified_paths(store, op, impl, kind, name):
        raise UnverifiedPath(f"{op}/{impl}: config {json.dumps(config, sort_keys=True)} takes path {want}, which "
                             f"has no passing verification on {device}; run `kernelbench verify {op} --impl {impl} "
                             f"--device {kind}` first, into the same database")
