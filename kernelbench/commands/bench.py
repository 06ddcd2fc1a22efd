"""`kernelbench bench [OP ...]`: time implementations at real deployment shapes, keep every result.

Each (op, implementation, shape) is timed by kernelbench.harness.timing.measure_impl (CUDA-graph replay over
rotating input sets, or events + L2 flush), its timed outputs rechecked against the reference, and
stored in the database (bench_result, raw samples included) with the environment fingerprint and
the git commit; `--json` also writes the rows for `kernelbench gate`.
"""
from __future__ import annotations

import sys

import click
from rich.console import Console
from rich.table import Table

from kernelbench import registry
from kernelbench.commands._common import open_store, require_match, where_option
from kernelbench.harness import timing
from kernelbench.harness.bench import BenchRun, bench_work, free_memory, measure_trial, repeated_config


@click.command("bench")
@click.argument("ops", nargs=-1)
@click.option("--shapes", "shape_sets", multiple=True, default=("flash-tp8",), show_default=True,
              help="shape set(s): flash-tp8, flash-tp1, pro-tp8, flash-tp8-long, ...")
@click.option("--impl", "impl_names", multiple=True, help="implementations to time (default: all registered)")
@click.option("--batch", "batches", multiple=True, type=int, help="only these batch sizes C (default: the set's)")
@click.option("--context", "contexts", multiple=True, type=int, help="only these contexts (ops with a ctx)")
@where_option
@click.option("--method", type=click.Choice(["graph", "events"]), default="graph", show_default=True)
@click.option("--max-time", "max_time_s", type=float, default=1.0, show_default=True,
              help="seconds of adaptive repetition per case at most")
@click.option("--target-rse", type=float, default=0.01, show_default=True, help="stop at this relative std error")
@click.option("--max-sets", type=int, default=256, show_default=True, help="cap on rotating input sets")
@click.option("--module", "modules", multiple=True, help="a user kernel module (path or dotted name) to load")
@click.option("--db", default=None, help="database URL (default $KERNELBENCH_DB or the user data dir)")
@click.option("--run-tag", default=None, help="tag of this run (default: the start time)")
@click.option("--json", "json_out", default=None, help="also write the results as JSON (for kernelbench gate)")
@click.option("--try", "tries", multiple=True, metavar="TRIAL",
              help="also time each case with these configs, on the same inputs, as a row of its own: "
                   "OP[@KEY=V[,V...]...]=JSON as decode-bench --try (e.g. 'moe_layer@T=1={\"GATE_WARPS\": 8}'), "
                   "its keys over the config each of the op's lookups finds (a tuned entry or the default; {} the "
                   "default instead of the entry), or over the impl's default_config where it looks none up; "
                   "repeatable, row 'IMPL tryN' for the N-th (kernelbench/harness/bench.py measure_trial)")
def command(ops, shape_sets, impl_names, batches, contexts, where, method, max_time_s, target_rse, max_sets, modules, db,
            run_tag, json_out, tries):
    """Time every implementation of OPS (all ops when none are named) at the shapes of the shape sets."""
    for m in modules:
        registry.load_module(m)
    trials = _parse_trials(tries)          # a misspelt trial fails here, on any machine
    try:
        timing.require_cuda()
    except timing.NoGPUError as e:
        raise click.ClickException(f"{e}. `kernelbench bench` measures on a GPU only.") from None
    from kernelbench.usage import check_settings
    check_settings()
    run = BenchRun.start(open_store(db), run_tag)
    console = Console(width=220)
    table = Table(title=f"bench on {run.device} ({method}; run {run.run_tag})")
    for col in ("op", "impl", "shape", "median us", "IQR us", "n", "GB/s", "TFLOP/s", "% roof", "ok", "notes"):
        table.add_column(col, justify="right" if col in ("median us", "IQR us", "n", "GB/s", "TFLOP/s", "% roof") else "left")
    failures = 0
    work = bench_work(ops, impl_names, shape_sets, batches, contexts, where)
    require_match(ops, where, bool(work))
    from kernelbench.progress import steps
    with steps("bench", len(work), console=console) as advance:
        for spec, impl, params in work:
            advance(f"{spec.name}/{impl.name} {spec.label(params)}"[:80])
            try:
                m = run.measure(spec, impl, params, method=method, max_time_s=max_time_s, target_rse=target_rse,
                                max_sets=max_sets)
            except Exception as e:  # noqa: BLE001 - one failing case must not end the run
                failures += 1
                console.print(f"[red]{spec.name}/{impl.name} {spec.label(params)}: {type(e).__name__}: {e}[/red]")
                _stop_on_fault(e, console, run, json_out)
                free_memory()
                continue
            failures += _show(run, table, console, impl, m, m.impl, json_out, None)
            free_memory()
            stored = {}                     # this case's rows by config: a trial that repeats one is not run
            repeated_config(stored, m.config, impl.name)
            for i, trial in enumerate(trials, 1):
                try:
                    mt, why = measure_trial(run.measure, spec, impl, params, trial, stored=stored,
                                            row=f"{impl.name} try{i}", method=method, max_time_s=max_time_s,
                                            target_rse=target_rse, max_sets=max_sets)
                except Exception as e:  # noqa: BLE001 - a config a kernel refuses is the trial's finding
                    failures += 1
                    console.print(f"[red]{spec.name}/{impl.name} try{i} {spec.label(params)}: {type(e).__name__}: "
                                  f"{str(e).splitlines()[0][:160]}[/red]")
                    _stop_on_fault(e, console, run, json_out)
                    free_memory()
                    continue
                if mt is None:
                    if spec.name in {p.op for p in trial.pins}:
                        console.print(f"{spec.name}/{impl.name} try{i} {spec.label(params)[:60]}: {why}")
                    continue
                failures += _show(run, table, console, impl, mt, f"{impl.name} try{i}", json_out, trial.text)
                free_memory()
    console.print(table)
    for i, trial in enumerate(trials, 1):
        console.print(f"try{i}: {trial.text}")
    if json_out:
        run.write(json_out)
    console.print(f"{len(run.rows)} results stored in {run.store.where} (run tag {run.run_tag}); {failures} failed "
                  f"or flagged")
    sys.exit(1 if failures else 0)


def _parse_trials(tries) -> list:
    """--try values -> Trials (decode-bench's spelling and checks: known ops, the config keys their kernels take)."""
    from kernelbench.decoder.trials import parse_trial
    from kernelbench.usage import config_keys
    known_ops = {o.name for o in registry.ops()}
    try:
        trials = [parse_trial(t, known_ops, config_keys) for t in tries]
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="--try") from None
    for t in trials:        # stream and launch settings belong to the step (decode-bench --try), not to one op
        if t.env:
            raise click.BadParameter(f"{t.text!r}: {', '.join(n for n, _ in t.env)} is a setting of the decode step; "
                                     f"judge it with `kernelbench decode-bench --try`", param_hint="--try")
    return trials


def _stop_on_fault(e: Exception, console, run, json_out) -> None:
    """After a CUDA fault the context is unusable: keep what was measured and stop (exit 2)."""
    from kernelbench.harness.tune import cuda_fault
    if cuda_fault(e):
        console.print("[red]the CUDA context is unusable after this fault: stopping; results so far are stored. "
                      "Re-run from the next op (`kernelbench bench OP ...`).[/red]")
        if json_out:
            run.write(json_out)
        sys.exit(2)


def _show(run, table, console, impl, m, shown_as: str, json_out, trial: str | None) -> int:
    """Store a measurement (`trial`: the --try text of a trial row, None for a plain one), write the --json file so
    far, add its table row (impl column `shown_as`) and a line; -> 1 when it failed its recheck or the roofline
    check, else 0."""
    run.keep(impl, m, trial)
    if json_out:   # after every result: a run cut short still leaves what it measured
        run.write(json_out)
    pt = run.roofline_point(m)
    ok = "yes" if m.ok else ("WRONG" if not m.verified else "ROOFLINE")
    table.add_row(m.op, shown_as, m.label[:60], f"{m.summary.median_us:.2f}", f"{m.summary.iqr_us:.2f}",
                  str(m.summary.n), f"{m.gbps:.0f}", f"{m.tflops:.2f}",
                  "-" if pt is None else f"{100 * pt.fraction:.1f}", ok,
                  "; ".join(m.notes + ([m.roofline_error] if m.roofline_error else [])
                            + ([m.verify_detail] if not m.verified else []))[:120])
    console.print(f"{m.op}/{shown_as} {m.label[:70]}: {m.summary.median_us:.2f} us "
                  f"(IQR {m.summary.iqr_us:.2f}, n={m.summary.n}) {ok}")
    return 0 if m.ok else 1
