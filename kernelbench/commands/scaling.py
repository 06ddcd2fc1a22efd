"""`kernelbench scaling [OP ...]`: time vs batch, vs actual context, and vs allocated capacity at a
fixed actual length; fit time = a + b*x and flag cost that follows the allocation or a per-request
cost that batching does not amortize (kernelbench/harness/scaling.py). Every point is stored as a bench
result (run tag "scaling:<time>")."""
from __future__ import annotations

import contextlib

import datetime as _dt
import json

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
    from kernelbench.harness import calibrate, roofline
    from kernelbench.commands._common import open_store
    from kernelbench.harness.bench import free_memory, peaks_for, record
    from kernelbench.harness.fingerprint import fingerprint, git_commit
    store = open_store(db)
    fp = fingerprint("cuda")
    env_id = store.environment_id(fp)
    ceil = roofline.ceilings_for(fp["gpu_name"], calibrate.load_ceilings(store, env_id))
    git, tag = git_commit(), "scaling:" + _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    peaks = peaks_for(fp["gpu_name"])
    console = Console(width=220)
    sweeps = []
    for op in ops or ():
        if op not in sc.PRESETS:
            raise click.ClickException(f"no scaling preset for {op!r}; presets: {', '.join(sc.PRESETS)}")
    total = sum(len(values) for op in ops or sorted(sc.PRESETS)
                for impl in registry.impls(op) if not impl_names or impl in impl_names
                for axis, _, _, values in sc.PRESETS[op] if not axes or axis in axes)
    from kernelbench.progress import steps
    bar = contextlib.ExitStack()
    advance = bar.enter_context(steps("scaling (points)", total, console=console))
    for op in ops or sorted(sc.PRESETS):
        if op not in sc.PRESETS:
            raise click.ClickException(f"no scaling preset for {op!r}; presets: {', '.join(sc.PRESETS)}")
        spec = registry.get_op(op)
        for impl in sorted(registry.impls(op).values(), key=lambda i: i.name):
            if impl_names and impl.name not in impl_names:
                continue
            for axis, base, key, values in sc.PRESETS[op]:
                if axes and axis not in axes:
                    continue

                def measure(spec, impl, params, impl_=impl, tag_=f"{tag}:{op}:{axis}"):
                    advance(f"{spec.name}/{impl_.name} {axis}")
                    m = timing.measure_impl(spec, impl_, params, max_sets=4, max_time_s=max_time_s, peaks=peaks)
                    record(store, env_id, impl_, m, ceil, tag_, git)
                    free_memory()
                    return m.summary

                try:
                    sw = sc.sweep(spec, impl, axis, base, key, values, measure, ceil.gbps, ceil.peak(op),
                                  derive=sc.DERIVE.get((op, axis)), ratio=ratio,
                                  on_point=lambda p, s: console.print(f"  {op}/{impl.name} {key}={p[key]}: "
                                                                      f"{s.median_us:.2f} us"))
                except Exception as e:  # noqa: BLE001 - report and go on with the next sweep
                    console.print(f"[red]{op}/{impl.name} {axis}: {type(e).__name__}: {e}[/red]")
                    free_memory()
                    continue
                sweeps.append(sw)
                if json_out:   # after every sweep: a run cut short still leaves what it measured
                    _write(json_out, fp["gpu_name"], tag, sweeps)
    bar.close()
    t = Table(title=f"scaling on {fp['gpu_name']}")
    for col in ("op", "impl", "axis", "x", "us (median)", "floor us", "fit a + b x", "r2", "flags"):
        t.add_column(col)
    for sw in sweeps:
        t.add_row(sw.op, sw.impl, sw.axis, " ".join(f"{p.x:g}" for p in sw.points),
                  " ".join(f"{p.median_us:.1f}" for p in sw.points), " ".join(f"{p.modeled_us:.1f}" for p in sw.points),
                  f"{sw.fit.a:.2f} + {sw.fit.b:.3g} x", f"{sw.fit.r2:.3f}", "; ".join(sw.flags) or "-")
    console.print(t)
    if png and sweeps:
        sc.plot(sweeps, png)
    console.print(f"{sum(bool(s.flags) for s in sweeps)} of {len(sweeps)} sweeps flagged; points stored with run tag {tag}")


def _write(path: str, device: str, tag: str, sweeps: list) -> None:
    with open(path, "w") as f:
        json.dump({"device": device, "run_tag": tag, "sweeps": [s.as_dict() for s in sweeps]}, f, indent=1)
