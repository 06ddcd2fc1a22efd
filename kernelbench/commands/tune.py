"""`kernelbench tune [OP ...]`: search each Triton implementation's config space at the shapes of a
shape set, store every trial, and export the choices to the tuned JSON the kernels read.
Method: kernelbench/harness/tune.py. On a CPU it refuses unless --interpret (paths only, no export)."""
from __future__ import annotations

import contextlib

import os
import sys
import time

import click
from rich.console import Console
from rich.table import Table

from kernelbench import registry
from kernelbench.harness import timing
from kernelbench.harness import tune as tuner


@click.command("tune")
@click.argument("ops", nargs=-1)
@click.option("--shapes", "shape_sets", multiple=True, default=("flash-tp8",), show_default=True)
@click.option("--batch", "batches", multiple=True, type=int, help="only these batch sizes C")
@click.option("--context", "contexts", multiple=True, type=int, help="only these contexts (ops with a ctx)")
@click.option("--impl", "impl_names", multiple=True, help="only these implementations (default: every Triton one)")
@click.option("--max-trials", type=int, default=48, show_default=True,
              help="exhaustive up to this many configs per shape, a seeded sample + the default beyond")
@click.option("--top-k", type=int, default=3, show_default=True, help="configs re-timed interleaved")
@click.option("--rounds", type=int, default=3, show_default=True, help="interleaved re-time rounds")
@click.option("--budget", "budget_s", type=float, default=600.0, show_default=True, help="seconds for the whole run")
@click.option("--trial-timeout", type=float, default=60.0, show_default=True, help="seconds before a trial is a hang")
@click.option("--isolate/--no-isolate", default=True, show_default=True,
              help="run trials in a worker process, so a crash or hang is recorded, not fatal")
@click.option("--sm120-check/--no-sm120-check", default=True, show_default=True,
              help="compile each config for sm_120 first; unfit configs are recorded invalid, not run")
@click.option("--export", "export_path", default=None,
              help="tuned JSON to merge the choices into (default: the package's kernelbench/tuned/v1.json)")
@click.option("--no-export", is_flag=True, help="store trials and choices in the database only")
@click.option("--interpret", is_flag=True, help="CPU: run kernels in the Triton interpreter (tests; no export)")
@click.option("--module", "modules", multiple=True, help="a user kernel module (path or dotted name) to load")
@click.option("--db", default=None, help="database URL (default $KERNELBENCH_DB or the user data dir)")
def command(ops, shape_sets, batches, contexts, impl_names, max_trials, top_k, rounds, budget_s, trial_timeout,
            isolate, sm120_check, export_path, no_export, interpret, modules, db):
    """Tune the Triton implementations of OPS (all ops with a config space when none are named)."""
    if interpret:
        if os.environ.get("TRITON_INTERPRET") != "1":
            raise click.ClickException("--interpret needs TRITON_INTERPRET=1 in the environment before Python "
                                       "starts (Triton reads it at import)")
        device, timer_ref, no_export = "cpu", "cpu", no_export or export_path is None
    else:
        try:
            timing.require_cuda()
        except timing.NoGPUError as e:
            raise click.ClickException(f"{e}. Use --interpret (with TRITON_INTERPRET=1) to exercise the tuner "
                                       f"on a CPU.") from None
        device, timer_ref = "cuda", "gpu"
    from kernelbench.commands._common import open_store
    from kernelbench.harness.bench import select_cases
    from kernelbench.usage import check_tuning
    check_tuning()
    from kernelbench.harness.fingerprint import fingerprint, git_commit
    for m in modules:
        registry.load_module(m)
    store = open_store(db)
    env_id = store.environment_id(fingerprint(device))
    git = git_commit()
    console = Console(width=220)
    start = time.monotonic()
    results, skipped = [], []
    todo = [(spec, impl) for spec in registry.ops(list(ops) or None)
            for impl in registry.impls(spec.name).values()
            if impl.backend == "triton" and impl.configs is not None and (not impl_names or impl.name in impl_names)]
    total = sum(len(select_cases(spec, shape_sets, batches, contexts)) for spec, _ in todo)
    from kernelbench.progress import steps
    bar = contextlib.ExitStack()
    advance = bar.enter_context(steps(f"tune (budget {budget_s:g} s)", total, console=console))
    for spec in registry.ops(list(ops) or None):
        for impl in sorted(registry.impls(spec.name).values(), key=lambda i: i.name):
            if impl.backend != "triton" or impl.configs is None or (impl_names and impl.name not in impl_names):
                continue
            runner = tuner.IsolatedRunner(impl, device, modules, timer_ref, 0, trial_timeout) if isolate else None
            try:
                for params in tuner.interleave(spec, select_cases(spec, shape_sets, batches, contexts)):
                    left = budget_s - (time.monotonic() - start)
                    advance(f"{spec.name}/{impl.name} {spec.label(params)}"[:80])
                    if left <= 0:
                        skipped.append(f"{spec.name}/{impl.name} {spec.label(params)}")
                        continue
                    console.print(f"[bold]{spec.name}/{impl.name}[/bold] {spec.label(params)}")
                    try:
                        r = tuner.tune_one(spec, impl, params, store=store, env_id=env_id, device=device,
                                           timer=tuner.cpu_timer if (interpret and not isolate) else None,
                                           timer_ref=timer_ref, isolate=isolate, modules=modules, max_trials=max_trials,
                                           top_k=top_k, rounds=rounds, budget_s=left, trial_timeout_s=trial_timeout,
                                           sm120_check=sm120_check, git_commit=git, runner=runner, log=console.print)
                    except Exception as e:  # noqa: BLE001 - one shape failing must not end the run
                        console.print(f"[red]  failed: {type(e).__name__}: {e}[/red]")
                        continue
                    results.append(r)
                    if not no_export and r.chosen is not None:   # as it goes: a run cut short keeps its choices
                        try:
                            tuner.export([r], export_path, command="kernelbench tune " + " ".join(sys.argv[2:]),
                                         store=store)
                        except ValueError as e:   # verify_paths.UnverifiedPath: not exported
                            console.print(f"[red]  not exported: {e}[/red]")
            finally:
                if runner is not None:
                    runner.close()
    bar.close()
    t = Table(title=f"tuned on {fingerprint(device)['gpu_name']}")
    for col in ("op", "impl", "key", "ok", "invalid", "untried", "chosen", "us"):
        t.add_column(col)
    for r in results:
        n_ok = sum(tr.status == "ok" for tr in r.trials)
        t.add_row(r.op, r.impl, tuner.canon(r.key)[:60], str(n_ok), str(len(r.trials) - n_ok), str(r.untried),
                  "-" if r.chosen is None else tuner.canon(r.chosen)[:70],
                  "-" if r.chosen_us is None else f"{r.chosen_us:.2f}")
    console.print(t)
    for s in skipped:
        console.print(f"[yellow]not tuned (budget spent): {s}[/yellow]")
    if results and not no_export:
        console.print(f"choices exported to {export_path or 'kernelbench/tuned/v1.json'}")
    if not results:
        console.print("nothing was tuned (no Triton implementation with a config space for these ops?)")
