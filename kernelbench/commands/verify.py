"""`kernelbench verify`: every (op, implementation) against its fp64 reference (kernelbench/harness/verify.py),
with every example's error statistics kept in the results database.

    kernelbench verify                               # everything; GPU if there is one, else the interpreter
    kernelbench verify sparse_attention --impl triton --examples 200
    kernelbench verify --device cuda --shapes flash-tp8 --db sqlite:///h200.sqlite
    kernelbench verify --kernel-module my_kernels.py --impl mine
    kernelbench verify rms_norm --impl triton --params '{"M":2,"N":100}' --values normal --seed 0   # replay
"""
from __future__ import annotations

import json
import shlex
import sys

import click


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
               time_budget=None, progress=None, command="", config=None) -> dict:
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
                   kernel_modules=tuple(kernel_modules), time_budget_s=time_budget)
    pairs = select_pairs(ops, impls)
    _check_usage(pairs, shapes, examples, time_budget, case_values, params, values)
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
                raise click.UsageError("--params replays one example: name one op and one --impl")
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
    return _doc(reports, rec.run_id, store.where, opts, notes)


def _check_usage(pairs, shapes, examples, time_budget, case_values, params, values) -> None:
    """Usage errors end the command before anything runs or is recorded (issue 10, items 2, 5, 9)."""
    from kernelbench import usage
    from kernelbench.registry import VALUE_MODES
    usage.check_shape_set(shapes)
    usage.check_tuning()
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


def _print_human(doc: dict, console) -> None:
    from rich.markup import escape
    from rich.table import Table
    table = Table(title=f"verify run {doc['run_id']} on {doc['device']}"
                        + (f", shapes {doc['shape_set']}" if doc["shape_set"] else "") + f", profile {doc['profile']}")
    for col in ("op", "impl", "status", "examples", "failed", "strided refused", "worst rel_fro", "worst max_abs",
                "min cosine"):
        table.add_column(col, justify="right" if col not in ("op", "impl", "status") else "left")
    for p in doc["pairs"]:
        w = p["worst"].values()
        rel = max((x["rel_fro"] for x in w), default=None)
        mab = max((x["max_abs"] for x in p["worst"].values()), default=None)
        cos = min((x["cosine"] for x in p["worst"].values()), default=None)
        style = {"FAIL": "bold red", "pass": "green", "skipped": "yellow", "not run": "bold red"}[p["status"]]
        table.add_row(p["op"], p["impl"], f"[{style}]{p['status']}[/]", str(p["examples"]), str(p["failed"]),
                      str(p["rejected_strided"]), "" if rel is None else f"{rel:.3g}",
                      "" if mab is None else f"{mab:.3g}", "" if cos is None else f"{cos:.6f}")
    console.print(table)
    _print_paths(doc, console)
    for p in doc["pairs"]:
        if p["skipped"]:
            console.print(f"[yellow]skipped[/] {p['op']} / {p['impl']}: {p['skipped']}")
        elif p["status"] == "not run":
            console.print(f"[bold red]not run[/] {p['op']} / {p['impl']}: no example ran (time budget spent, or no "
                          f"examples and no shape-set case): no verdict")
        for n in p["notes"]:
            console.print(f"[dim]{p['op']} / {p['impl']}:[/] {escape(n)}", highlight=False)
    for f in doc["failures"]:
        console.print(f"\n[bold red]FAIL[/] {f['op']} / {f['impl']} ({f['source']}) params={f['params']} "
                      f"values={f['values']} seed={f['seed']} layout={f['layout']}")
        console.print(f["failure"], markup=False, highlight=False)
        console.print(f"[bold]reproduce:[/] {f['repro']}", highlight=False)
    for n in doc["notes"]:
        console.print(f"[cyan]note:[/] {n}")
    console.print(f"results: {doc['db']} (verify_run {doc['run_id']})")


def _print_paths(doc: dict, console) -> None:
    """Per (op, impl) with more than one config path: each path's verdict (verify_paths.py)."""
    from rich.markup import escape
    from rich.table import Table
    rows = [(p, c) for p in doc["pairs"] for c in p.get("paths", []) if len(p.get("paths", [])) > 1]
    if not rows:
        return
    table = Table(title="config paths (kernelbench/harness/verify_paths.py)")
    for col in ("op", "impl", "config", "status", "examples", "failed", "why"):
        table.add_column(col, justify="right" if col in ("examples", "failed") else "left")
    for p, c in rows:
        style = {"FAIL": "bold red", "pass": "green"}.get(c["status"], "yellow")
        why = "; ".join(c["why"]) + (f" [{c['reason']}]" if c["reason"] else "")
        table.add_row(p["op"], p["impl"], escape(c["label"]), f"[{style}]{c['status']}[/]", str(c["examples"]),
                      str(c["failed"]), escape(why))
    console.print(table)


def _json_object(text: str | None, hint: str) -> dict | None:
    """A JSON object given on the command line (None when the option is absent); a usage error otherwise."""
    if text is None:
        return None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        raise click.BadParameter(f"not JSON: {e}", param_hint=hint) from None
    if not isinstance(value, dict):
        raise click.BadParameter("must be a JSON object", param_hint=hint)
    return value


@click.command("verify")
@click.argument("ops", nargs=-1)
@click.option("--impl", "impls", multiple=True, help="only these implementations (repeatable)")
@click.option("--examples", type=click.IntRange(min=0), default=None,
              help="hypothesis examples per (op, impl) [explore: 50, ci: 12]")
@click.option("--device", type=click.Choice(["cuda", "cpu"]), default=None,
              help="cuda: the real kernels; cpu: the Triton interpreter [cuda if a GPU is visible]")
@click.option("--shapes", default=None,
              help="shape set whose real cases run first (flash-tp8, flash-tp1, pro-tp8, tiny, none) "
                   "[flash-tp8 on cuda, none on cpu]")
@click.option("--kernel-module", "kernel_modules", multiple=True,
              help="a user's module (file path or dotted name) registering implementations (repeatable)")
@click.option("--db", default=None, help="SQLAlchemy URL [$KERNELBENCH_DB or the user data directory]")
@click.option("--json", "as_json", is_flag=True, help="print a JSON document instead of tables")
@click.option("--profile", type=click.Choice(["explore", "ci"]), default="explore", show_default=True,
              help="explore: random, with the example database; ci: derandomized, no database")
@click.option("--case-values", default="normal", show_default=True,
              help="value modes for the shape set's cases: comma list or 'all'")
@click.option("--time-budget", type=float, default=None,
              help="seconds of hypothesis examples per (op, impl); a pair that ran no example is 'not run' (a failure)")
@click.option("--params", "params_json", default=None, help="replay one example: its params as JSON")
@click.option("--values", default=None, help="replay: the value mode")
@click.option("--seed", type=int, default=None, help="replay: the input generator's seed")
@click.option("--layout", type=click.Choice(["contiguous", "strided"]), default="contiguous", show_default=True,
              help="replay: the input layout")
@click.option("--config", "config_json", default=None,
              help="replay: the config the implementation is called with (JSON)")
def command(ops, impls, examples, device, shapes, kernel_modules, db, as_json, profile, case_values, time_budget,
            params_json, values, seed, layout, config_json):
    """Prove implementations compute their op's reference function, on drawn and real inputs."""
    from rich.console import Console
    from kernelbench.db.store import StoreError
    from kernelbench.registry import RegistryError
    from kernelbench.usage import UsageProblem
    from kernelbench.harness.verify import DeviceError
    params = _json_object(params_json, "--params")
    config = _json_object(config_json, "--config")
    _terminate_as_interrupt()
    out = Console(stderr=as_json, width=200)
    err = Console(stderr=True)
    progress_cb, bar = _progress(err)
    try:
        with bar or _null():
            doc = run_verify(ops, impls, device=device, examples=examples, profile=profile, shapes=shapes,
                             kernel_modules=kernel_modules, db=db, case_values=case_values, params=params,
                             values=values, seed=seed, layout=layout, time_budget=time_budget,
                             progress=progress_cb, command=shlex.join(["kernelbench", "verify", *sys.argv[2:]]),
                             config=config)
    except UsageProblem as e:
        raise click.UsageError(str(e)) from None
    except (DeviceError, StoreError, RegistryError, LookupError, FileNotFoundError) as e:
        raise click.ClickException(str(e)) from None
    if as_json:
        click.echo(json.dumps(doc, indent=1, default=str))
    else:
        _print_human(doc, out)
    if not doc["passed"]:
        sys.exit(1)


def _terminate_as_interrupt() -> None:
    """SIGTERM (a `timeout`, a job limit) ends the run like Ctrl-C: its verify_run row is marked
    'interrupted' and every result already written stays."""
    import signal

    def handler(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")
    try:
        signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread (embedded use): leave the default
        pass


def _null():
    import contextlib
    return contextlib.nullcontext()


def _progress(console):
    """A rich progress bar over (op, impl) pairs, with the running example count."""
    import time
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, \
        TimeRemainingColumn
    if not console.is_terminal:   # a log (CI, the GPU machine): one line per pair as it starts, with the pace
        last = {"pair": None, "t0": time.monotonic()}

        def log(i, total, label, result):
            if label != last["pair"]:
                last["pair"] = label
                spent = time.monotonic() - last["t0"]
                eta = f", about {spent / i * (total - i) / 60:.0f} min left at this pace" if i else ""
                console.print(f"verify [{i + 1}/{total}] {label} ({spent:.0f} s{eta})", highlight=False)
        return log, None
    bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[ex]}"),
                   TimeElapsedColumn(), TextColumn("left"), TimeRemainingColumn(), console=console, transient=True)
    state = {"task": None, "n": 0, "failed": 0, "pair": None}

    def update(i, total, label, result):
        if state["task"] is None:
            state["task"] = bar.add_task("verify", total=total, ex="")
        if label != state["pair"]:
            state.update(pair=label, n=0, failed=0)
        if result is not None:
            state["n"] += 1
            state["failed"] += 0 if result.passed else 1
        bar.update(state["task"], completed=i, description=label,
                   ex=f"{state['n']} examples, {state['failed']} failed")
    return update, bar
