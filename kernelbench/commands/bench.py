"""`kernelbench bench [OP ...]`: time implementations at real deployment shapes, keep every result.

Each (op, implementation, shape) is timed by kernelbench.harness.timing.measure_impl (CUDA-graph replay over
rotating input sets, or events + L2 flush), its timed outputs rechecked against the reference, and
stored in the database (bench_result, raw samples included) with the environment fingerprint and
the git commit; `--json` also writes the rows for `kernelbench gate`.
"""
from __future__ import annotations

import datetime as _dt
import json
import sys

import click
from rich.console import Console
from rich.table import Table

from kernelbench import registry
from kernelbench.harness import timing


def open_store(db: str | None):
    from kernelbench.db.store import Store, StoreError
    try:
        return Store(db)
    except StoreError as e:
        raise click.ClickException(str(e)) from None


def peaks_for(device: str) -> tuple[float, float] | None:
    """The fastest the datasheet allows (any precision), for the 'faster than hardware' check."""
    from kernelbench.harness import devices
    spec = devices.find(device)
    if spec is None:
        return None
    return max(spec.bf16_tflops, spec.fp8_tflops, spec.fp4_tflops), spec.bandwidth_gbps


def select_cases(spec, shape_sets: tuple[str, ...], batches: tuple[int, ...], contexts: tuple[int, ...]) -> list[dict]:
    from kernelbench.harness.inspector import batch_of
    out = []
    for ss in shape_sets:
        for p in spec.shape_cases(ss):
            if batches and batch_of(p) not in (None, *batches):
                continue
            if contexts and "ctx" in p and p["ctx"] not in contexts:
                continue
            if p not in out:
                out.append(p)
    return out


def record(store, env_id: int, impl, m: timing.Measurement, ceilings, run_tag: str, git: str) -> None:
    from kernelbench.harness import roofline
    pt = roofline.point(m.op, m.impl, m.label, m.flops, m.bytes, ceilings, m.summary.median_us) if ceilings else None
    extra = {"verified": m.verified, "verify_detail": m.verify_detail, "roofline_error": m.roofline_error,
             "notes": m.notes, "sets": m.sets, "rotated_bytes": m.rotated_bytes, "l2_cold": m.l2_cold,
             "launches": m.launches, "mean_us": m.summary.mean_us,
             "ceilings": None if ceilings is None else ceilings.source}
    store.add_bench_results([dict(
        environment_id=env_id, implementation_id=store.impl_id(impl), shape_label=m.label, params=m.params,
        config=m.config, method=m.method, median_us=m.summary.median_us, q1_us=m.summary.q1_us,
        q3_us=m.summary.q3_us, n=m.summary.n, rel_stderr=m.summary.rel_stderr, samples=m.summary.samples,
        flops=m.flops, bytes=m.bytes, gbps=m.gbps, tflops=m.tflops,
        fraction_of_ceiling=None if pt is None else pt.fraction, sm_clock_mhz=m.sm_clock_mhz,
        git_commit=git, run_tag=run_tag, extra=extra)])


def as_row(device: str, m: timing.Measurement, git: str) -> dict:
    return {"device": device, "op": m.op, "impl": m.impl, "label": m.label, "params": m.params, "config": m.config,
            "method": m.method, "median_us": m.summary.median_us, "q1_us": m.summary.q1_us, "q3_us": m.summary.q3_us,
            "n": m.summary.n, "verified": m.verified, "verify_detail": m.verify_detail,
            "roofline_error": m.roofline_error, "l2_cold": m.l2_cold, "git_commit": git}


@click.command("bench")
@click.argument("ops", nargs=-1)
@click.option("--shapes", "shape_sets", multiple=True, default=("flash-tp8",), show_default=True,
              help="shape set(s): flash-tp8, flash-tp1, pro-tp8, flash-tp8-long, ...")
@click.option("--impl", "impl_names", multiple=True, help="implementations to time (default: all registered)")
@click.option("--batch", "batches", multiple=True, type=int, help="only these batch sizes C (default: the set's)")
@click.option("--context", "contexts", multiple=True, type=int, help="only these contexts (ops with a ctx)")
@click.option("--method", type=click.Choice(["graph", "events"]), default="graph", show_default=True)
@click.option("--max-time", "max_time_s", type=float, default=1.0, show_default=True,
              help="seconds of adaptive repetition per case at most")
@click.option("--target-rse", type=float, default=0.01, show_default=True, help="stop at this relative std error")
@click.option("--max-sets", type=int, default=256, show_default=True, help="cap on rotating input sets")
@click.option("--module", "modules", multiple=True, help="a user kernel module (path or dotted name) to load")
@click.option("--db", default=None, help="database URL (default $KERNELBENCH_DB or the user data dir)")
@click.option("--run-tag", default=None, help="tag of this run (default: the start time)")
@click.option("--json", "json_out", default=None, help="also write the results as JSON (for kernelbench gate)")
def command(ops, shape_sets, impl_names, batches, contexts, method, max_time_s, target_rse, max_sets, modules, db,
            run_tag, json_out):
    """Time every implementation of OPS (all ops when none are named) at the shapes of the shape sets."""
    try:
        timing.require_cuda()
    except timing.NoGPUError as e:
        raise click.ClickException(f"{e}. `kernelbench bench` measures on a GPU only.") from None
    from kernelbench.harness import calibrate, roofline
    from kernelbench.harness.fingerprint import fingerprint, git_commit
    from kernelbench.usage import check_tuning
    check_tuning()
    for m in modules:
        registry.load_module(m)
    store = open_store(db)
    fp = fingerprint("cuda")
    env_id = store.environment_id(fp)
    device = fp["gpu_name"]
    git = git_commit()
    run_tag = run_tag or _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    try:
        ceilings = roofline.ceilings_for(device, calibrate.load_ceilings(store, env_id))
    except ValueError:
        ceilings = None
    peaks = peaks_for(device)
    console = Console(width=220)
    table = Table(title=f"bench on {device} ({method}; run {run_tag})")
    for col in ("op", "impl", "shape", "median us", "IQR us", "n", "GB/s", "TFLOP/s", "% roof", "ok", "notes"):
        table.add_column(col, justify="right" if col in ("median us", "IQR us", "n", "GB/s", "TFLOP/s", "% roof") else "left")
    rows, failures = [], 0
    work = [(spec, impl, params) for spec in registry.ops(list(ops) or None)
            for impl in sorted(registry.impls(spec.name).values(), key=lambda i: i.name)
            if not impl_names or impl.name in impl_names
            for params in select_cases(spec, shape_sets, batches, contexts)]
    from kernelbench.progress import steps
    with steps("bench", len(work), console=console) as advance:
        for spec, impl, params in work:
            advance(f"{spec.name}/{impl.name} {spec.label(params)}"[:80])
            try:
                m = timing.measure_impl(spec, impl, params, method=method, peaks=peaks, max_time_s=max_time_s,
                                        target_rse=target_rse, max_sets=max_sets)
            except Exception as e:  # noqa: BLE001 - one failing case must not end the run
                failures += 1
                console.print(f"[red]{spec.name}/{impl.name} {spec.label(params)}: {type(e).__name__}: {e}[/red]")
                from kernelbench.harness.tune import cuda_fault
                if cuda_fault(e):
                    console.print("[red]the CUDA context is unusable after this fault: stopping; results so far "
                                  "are stored. Re-run from the next op (`kernelbench bench OP ...`).[/red]")
                    if json_out:
                        _write(json_out, device, git, run_tag, rows)
                    sys.exit(2)
                _free()
                continue
            record(store, env_id, impl, m, ceilings, run_tag, git)
            rows.append(as_row(device, m, git))
            if json_out:   # after every result: a run cut short still leaves what it measured
                _write(json_out, device, git, run_tag, rows)
            pt = roofline.point(m.op, m.impl, m.label, m.flops, m.bytes, ceilings, m.summary.median_us) if ceilings else None
            ok = "yes" if m.ok else ("WRONG" if not m.verified else "ROOFLINE")
            failures += 0 if m.ok else 1
            table.add_row(m.op, m.impl, m.label[:60], f"{m.summary.median_us:.2f}", f"{m.summary.iqr_us:.2f}",
                          str(m.summary.n), f"{m.gbps:.0f}", f"{m.tflops:.2f}",
                          "-" if pt is None else f"{100 * pt.fraction:.1f}", ok,
                          "; ".join(m.notes + ([m.roofline_error] if m.roofline_error else [])
                                    + ([m.verify_detail] if not m.verified else []))[:120])
            console.print(f"{m.op}/{m.impl} {m.label[:70]}: {m.summary.median_us:.2f} us "
                          f"(IQR {m.summary.iqr_us:.2f}, n={m.summary.n}) {ok}")
            _free()
    console.print(table)
    if json_out:
        _write(json_out, device, git, run_tag, rows)
    console.print(f"{len(rows)} results stored in {store.where} (run tag {run_tag}); {failures} failed or flagged")
    sys.exit(1 if failures else 0)


def _free() -> None:
    import gc
    import torch
    gc.collect()
    torch.cuda.empty_cache()


def _write(path: str, device: str, git: str, run_tag: str, rows: list) -> None:
    with open(path, "w") as f:
        json.dump({"device": device, "git_commit": git, "run_tag": run_tag, "results": rows}, f, indent=1)
