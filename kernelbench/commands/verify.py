"""`kernelbench verify`: every (op, implementation) against its fp64 reference (kernelbench/harness/verify.py),
with every example's error statistics kept in the results database. The run is
kernelbench/harness/verify_run.py; this is the command line.

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

from kernelbench.commands._common import where_option


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
@where_option
def command(ops, impls, examples, device, shapes, kernel_modules, db, as_json, profile, case_values, time_budget,
            params_json, values, seed, layout, config_json, where):
    """Prove implementations compute their op's reference function, on drawn and real inputs."""
    from rich.console import Console
    from kernelbench.db.store import StoreError
    from kernelbench.registry import RegistryError
    from kernelbench.usage import UsageProblem
    from kernelbench.harness.verify import DeviceError
    from kernelbench.harness.verify_run import run_verify
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
                             config=config, where=where)
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
