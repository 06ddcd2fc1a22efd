"""One `kernelbench verify` run as a function: select the (op, implementation) pairs, check usage, verify
each pair (harness/verify.py), record every example (harness/verify_record.py), and return the JSON
document the command prints. Usage problems raise kernelbench.usage.UsageProblem before anything runs or
is recorded."""
from __future__ import annotations

import json


def _doc(reports, run_id, store_where, opts, notes) -> dict:
    return {
        "run_id": run_id, "db": store_where, "device": opts.device, "profile": opts.profile,
        "shape_set": opts.shape_set, "notes": notes,
        "passed": all(r.status in ("pass", "skipped") for r in reports),   # zero examples is not a pass
        "pairs": [{"op": r.op, "impl": r.impl, "backend": r.backend, "status": r.status, "examples": r.n,
                   "failed": r.failed, "rejected_strided": r.rejected, "skipped": r.skipped, "worst": r.worst,
                   "notes": r.notes, "paths": _paths_doc(r)} for r in reports],
        "failures": [{"op": f.example.op, "impl": f.example.impl, "params": f.example.params,
                      "values": f.example.values, "seed": f.example.seed, "layout": f.example.layout,
                      "source": f.example.source, "config": f.example.config, "failure": f.failure,
                      "repro": f.example.repro(opts.device, opts.kernel_modules)}
                     for r in reports for f in r.failures],
    }


def _paths_doc(r) -> list[dict]:
    """Per config path of the pair: the default (verified by the pair's examples), then verify_paths'."""
    if r.skipped:
        return [{"config": None, "label": "default", "why": [], "status": "skipped", "examples": 0, "failed": 0,
                 "reason": r.skipped}]
    n_paths = sum(p.examples for p in r.paths)
    f_paths = sum(p.failed for p in r.paths)
    from kernelbench import registry
    from kernelbench.harness.verify_paths import select_paths
    try:
        why = select_paths(registry.get_impl(r.op, r.impl))[0].why
    except Exception as e:  # noqa: BLE001 - a broken config space shows, it does not hide the verdicts
        why = [f"paths unavailable: {type(e).__name__}: {e}"]
    default = {"config": None, "label": "default", "why": ["the config the kernel picks itself here"] + why[1:],
               "status": "FAIL" if r.failed - f_paths else "pass", "examples": r.n - n_paths,
               "failed": r.failed - f_paths, "reason": ""}
    return [default] + [p.as_dict() for p in r.paths]


def run_verify(ops=(), impls=(), *, device=None, examples=None, profile="explore", shapes=None, kernel_modules=(),
               db=None, case_values="normal", params=None, values=None, seed=None, layout="contiguous",
               time_budget=None, progress=None, command="", config=None, where=None) -> dict:
    """The command as a function: verify, record, and return the JSON document (see `_doc`)."""
    from kernelbench.harness.verify import INTERPRETER_NOTE, Options, prepare_device, select_pairs, verify_pair, \
        interpreter_active
    device = prepare_device(device)            # before any kernel import: sets TRITON_INTERPRET on CPU
    from kernelbench import registry
    from kernelbench.db.store import Store
    from kernelbench.harness.verify_check import Example
    from kernelbench.harness.verify_record import Recorder
    registry.load_builtin()
    for m in kernel_modules:
        registry.load_module(m)
    if shapes is None:
        shapes = "flash-tp8" if device == "cuda" else None
    elif shapes == "none":
        shapes = None
    replaying = params is not None
    if examples is None:
        examples = 0 if replaying else (50 if profile == "explore" else 12)
    all_values = case_values == "all"
    opts = Options(device=device, examples=examples, profile=profile, shape_set=shapes,
                   case_values=() if all_values else tuple(v for v in case_values.split(",") if v),
                   kernel_modules=tuple(kernel_modules), time_budget_s=time_budget, where=where or None)
    pairs = select_pairs(ops, impls)
    _check_usage(pairs, shapes, examples, time_budget, case_values, params, values)
    _check_where(pairs, shapes, where)
    notes = []
    if device == "cpu" and any(i.backend == "triton" for _, i in pairs):
        notes.append(INTERPRETER_NOTE if interpreter_active() else
                     "TRITON_INTERPRET is not 1: Triton implementations are skipped on CPU")
    store = Store(db)
    rec = Recorder(store, opts, command=command)
    reports = []
    status = "error"
    try:
        if replaying:
            if len(pairs) != 1:
                from kernelbench.usage import UsageProblem
                raise UsageProblem("--params replays one example: name one op and one --impl")
            spec, impl = pairs[0]
            from kernelbench.harness.verify import PairReport, replay, skip_reason
            rep = PairReport(spec.name, impl.name, impl.backend)
            rep.skipped = skip_reason(impl, device) or ""
            if not rep.skipped:
                ex = Example(spec.name, impl.name, params, values or spec.value_modes[0], seed or 0, layout,
                             config=config)
                r = replay(spec, impl, ex, device)
                if config is not None:
                    r.stats.setdefault("checks", {})["config"] = dict(config)
                rec.result(r)
                rep.add(r)
                rep.notes.append(json.dumps(r.stats, default=str))
            reports.append(rep)
        else:
            for i, (spec, impl) in enumerate(pairs):
                if progress:
                    progress(i, len(pairs), f"{spec.name} / {impl.name}", None)
                pair_opts = opts
                if all_values:
                    pair_opts = Options(**{**opts.__dict__, "case_values": spec.value_modes})

                def on_result(r, _spec=spec, _impl=impl):
                    rec.result(r)
                    if progress:
                        progress(i, len(pairs), f"{_spec.name} / {_impl.name}", r)
                reports.append(verify_pair(spec, impl, pair_opts, on_result))
        status = "failed" if any(r.failed for r in reports) else \
            "not run" if any(r.status == "not run" for r in reports) else "passed"
    except KeyboardInterrupt:
        status = "interrupted"
        raise
    finally:
        rec.finish(status)
        store.dispose()   # closes the connections: SQLite folds the WAL back into the one file
    if device == "cuda":
        import torch
        from kernelbench.kernels.common import fp8_promote
        note = fp8_adder_note({r.op for r in reports if r.failed}, torch.cuda.get_device_capability(), fp8_promote())
        if note:
            notes.append(note)
    return _doc(reports, rec.run_id, store.where, opts, notes)


def fp8_adder_note(failed_ops: set, capability: tuple, promote: int) -> str | None:
    """What to try when an op with 128-deep fp8 dots fails on sm_90 with Triton's accumulation (KERNELBENCH_FP8_PROMOTE
    =0, no longer the default since session 47; session 46: one activation outlier's product rounds the others in the
    QGMMA adder; docs/perf/linear.md); None otherwise."""
    from kernelbench.kernels.common import FP8_DOT_OPS, FP8_PROMOTE_ENV
    ops = sorted(failed_ops & set(FP8_DOT_OPS))
    if not ops or tuple(capability) != (9, 0) or promote:
        return None
    return (f"{', '.join(ops)}: fp8 tensor-core dots on sm_90 keep about 14 bits aligned to a block's largest product "
            f"(an activation outlier rounds the rest; scripts/qgmma_accumulation_model.py). To tell that from a "
            f"kernel bug, rerun the reproduce line with {FP8_PROMOTE_ENV}=32 (a full-fp32 add every 32 products)")


def _check_where(pairs, shapes, where) -> None:
    """--where filters the shape set's real cases: it needs a shape set, and a filter that selects no case of the
    named ops is a typo or a key they lack (said before anything runs, as bench and tune do)."""
    if not where:
        return
    from kernelbench import usage
    from kernelbench.harness.bench import describe_where, matches_where
    from kernelbench.registry import get_shape_set
    if not shapes:
        raise usage.UsageProblem(f"{describe_where(where)} filters the shape set's cases: name one with --shapes")
    cases = [c for spec in {s.name: s for s, _ in pairs}.values() for c in spec.shape_cases(get_shape_set(shapes))]
    if not any(matches_where(c, where) for c in cases):
        ops = " ".join(sorted({s.name for s, _ in pairs}))
        raise usage.UsageProblem(f"no {shapes} case of {ops} matches {describe_where(where)}")


def _check_usage(pairs, shapes, examples, time_budget, case_values, params, values) -> None:
    """Usage errors end the command before anything runs or is recorded (issue 10, items 2, 5, 9)."""
    from kernelbench import usage
    from kernelbench.registry import VALUE_MODES
    usage.check_shape_set(shapes)
    usage.check_settings()
    if params is None and examples == 0 and not shapes:
        raise usage.UsageProblem("--examples 0 without a shape set (--shapes) runs nothing: zero examples is not "
                                 "a verdict")
    if time_budget is not None and not time_budget > 0:
        raise usage.UsageProblem(f"--time-budget {time_budget:g}: must be a positive number of seconds")
    if case_values != "all":
        bad = [v for v in case_values.split(",") if v not in VALUE_MODES]
        if bad or not case_values:
            raise usage.UsageProblem(f"--case-values {case_values!r}: use 'all' or a comma list of "
                                     f"{', '.join(VALUE_MODES)}")
    if params is not None and len(pairs) == 1:
        spec = pairs[0][0]
        usage.check_replay_params(spec.name, params)
        if values is not None and values not in spec.value_modes:
            raise usage.UsageProblem(f"--values {values!r}: {spec.name} has {', '.join(spec.value_modes)}")
