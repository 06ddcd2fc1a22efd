"""`kernelbench scaling [OP ...]`: time vs batch, vs actual context, and vs allocated capacity at a
fixed actual length; fit time = a + b*x and flag cost that follows the allocation or a per-request
cost that batching does not amortize (kernelbench/harness/scaling.py). Every point is stored as a bench
result (run tag "scaling:<time>")."""
from __future__ import annotations

import datetime as _dt

import click
from rich.console import Console
from rich.table import Table

from kernelbench import registry
from kernelbench.harness import timing
from kernelbench.harness import scaling as sc


@click.command("scaling")
@click.argument("ops", nargs=-1)
@click.option("--impl", "impl_names", multiple=True, help="implementations (default: every one, reference too)")
@click.option("--axis", "axes", multiple=True, type=click.Choice(sc.AXES), help="only these axes")
@click.option("--max-time", "max_time_s", type=float, default=0.5, show_default=True, help="seconds per point at most")
@click.option("--ratio", type=float, default=1.25, show_default=True, help="growth over the modeled growth that flags")
@click.option("--module", "modules", multiple=True,
              help="a user kernel module (path or dotted name) whose implementations are swept too")
@click.option("--db", default=None, help="database URL (default $KERNELBENCH_DB or the user data dir)")
@click.option("--json", "json_out", default=None, help="write the sweeps as JSON")
@click.option("--png", default=None, help="write the sweeps' plot here")
def command(ops, impl_names, axes, max_time_s, ratio, modules, db, json_out, png):
    """Scaling sweeps of OPS (default: the indexer and sparse attention presets)."""
    for m in modules:
        try:
            registry.load_module(m)
        except (FileNotFoundError, ImportError) as e:
            raise click.UsageError(f"--module {m}: {e}") from None
    try:
        timing.require_cuda()
    except timing.NoGPUError as e:
        raise click.ClickException(f"{e}. Scaling sweeps time kernels on a GPU.") from None
    try:
        work = sc.scaling_work(ops, impl_names, axes)
    except ValueError as e:
        raise click.ClickException(str(e)) from None
    from kernelbench.harness import calibrate, roofline
    from kernelbench.commands._common import open_store
    from kernelbench.harness.bench import peaks_for
    from kernelbench.harness.fingerprint import fingerprint, git_commit
    store = open_store(db)
    fp = fingerprint("cuda")
    env_id = store.environment_id(fp)
    tag = "scaling:" + _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    console = Console(width=220)
    from kernelbench.progress import steps
    with steps("scaling (points)", sum(len(w[-1]) for w in work), console=console) as advance:
        sweeps = sc.scaling_run(work, store=store, env_id=env_id,
                                ceilings=roofline.ceilings_for(fp["gpu_name"], calibrate.load_ceilings(store, env_id)),
                                peaks=peaks_for(fp["gpu_name"]), run_tag=tag, git_commit=git_commit(),
                                max_time_s=max_time_s, ratio=ratio, device=fp["gpu_name"], json_out=json_out,
                                advance=advance, log=console.print)
    t = Table(title=f"scaling on {fp['gpu_name']}")
    for col in sc.SUMMARY_COLUMNS:
        t.add_column(col)
    for row in sc.summary_rows(sweeps):
        t.add_row(*row)
    console.print(t)
    if png and sweeps:
        sc.plot(sweeps, png)
    console.print(f"{sum(bool(s.flags) for s in sweeps)} of {len(sweeps)} sweeps flagged; points stored with run tag {tag}")
