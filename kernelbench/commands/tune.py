"""`kernelbench tune [OP ...]`: search each Triton implementation's config space at the shapes of a
shape set, store every trial, and export the choices to the tuned JSON the kernels read.
Method: kernelbench/harness/tune.py. On a CPU it refuses unless --interpret (paths only, no export)."""
from __future__ import annotations

import os
import sys

import click
from rich.console import Console
from rich.table import Table

from kernelbench import registry
from kernelbench.harness import timing
from kernelbench.harness import tune as tuner
from kernelbench.commands._common import require_match, where_option


@click.command("tune")
@click.argument("ops", nargs=-1)
@click.option("--shapes", "shape_sets", multiple=True, default=("flash-tp8",), show_default=True)
@click.option("--batch", "batches", multiple=True, type=int, help="only these batch sizes C")
@click.option("--context", "contexts", multiple=True, type=int, help="only these contexts (ops with a ctx)")
@where_option
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
def command(ops, shape_sets, batches, contexts, where, impl_names, max_trials, top_k, rounds, budget_s, trial_timeout,
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
    from kernelbench.usage import check_settings
    check_settings()
    from kernelbench.harness.fingerprint import fingerprint, git_commit
    for m in modules:
        registry.load_module(m)
    store = open_store(db)
    console = Console(width=220)
    work = tuner.tune_work(ops, impl_names, shape_sets, batches, contexts, where)
    require_match(ops, where, any(cases for _, _, cases in work))
    from kernelbench.progress import steps
    with steps(f"tune (budget {budget_s:g} s)", sum(len(cases) for _, _, cases in work), console=console) as advance:
        results, skipped = tuner.tune_run(
            work, store=store, env_id=store.environment_id(fingerprint(device)), device=device, timer_ref=timer_ref,
            interpret=interpret, isolate=isolate, modules=modules, max_trials=max_trials, top_k=top_k,
            rounds=rounds, budget_s=budget_s, trial_timeout=trial_timeout, sm120_check=sm120_check,
            git_commit=git_commit(), export_path=export_path, no_export=no_export,
            command="kernelbench tune " + " ".join(sys.argv[2:]), advance=advance, log=console.print)
    t = Table(title=f"tuned on {fingerprint(device)['gpu_name']}")
    for col in tuner.SUMMARY_COLUMNS:
        t.add_column(col)
    for row in tuner.summary_rows(results):
        t.add_row(*row)
    console.print(t)
    for s in skipped:
        console.print(f"[yellow]not tuned (budget spent): {s}[/yellow]")
    if not no_export:
        for line in tuner.export_summary(results):
            console.print(line, markup=False, highlight=False, soft_wrap=True)
    if not results:
        console.print("nothing was tuned (no Triton implementation with a config space for these ops?)")
