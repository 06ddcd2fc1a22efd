"""`kernelbench calibrate`: measure this GPU's ceilings (copy, L2, bf16 and fp8 matmul) and latency floors (a
dependent launch, with and without PDL, and a ticketed split-K stage) and store them with the device fingerprint,
beside the datasheet row when the device is known."""
from __future__ import annotations

import click
from rich.console import Console
from rich.table import Table

from kernelbench.harness import calibrate as cal
from kernelbench.harness import devices, timing


@click.command("calibrate")
@click.option("--measure", "measures", multiple=True, type=click.Choice(sorted(cal.MEASURES)),
              help="measure only these (default: all)")
@click.option("--db", default=None, help="database URL (default $KERNELBENCH_DB or the user data dir)")
def command(measures, db):
    """Measure copy bandwidth, L2 bandwidth, bf16/fp8 matmul rates and the launch / ticket latency floors; store
    them."""
    try:
        timing.require_cuda()
    except timing.NoGPUError as e:
        raise click.ClickException(f"{e}. Without a GPU, rooflines use the datasheet rows "
                                   f"(kernelbench roofline --device rtx-pro-6000).") from None
    from kernelbench.commands._common import open_store
    from kernelbench.harness.fingerprint import fingerprint, git_commit
    store = open_store(db)
    fp = fingerprint("cuda")
    env_id = store.environment_id(fp)
    console = Console(width=200)
    ceilings = cal.calibrate(list(measures) or None, log=console.print)
    cal.store_ceilings(store, env_id, ceilings, git_commit())
    sheet = devices.find(fp["gpu_name"])
    ref = {"copy_gbps": sheet.bandwidth_gbps, "bf16_tflops": sheet.bf16_tflops, "fp8_tflops": sheet.fp8_tflops} if sheet else {}
    t = Table(title=f"ceilings of {fp['gpu_name']} (environment {fp['fingerprint'][:12]})")
    for col in ("measure", "value", "unit", "datasheet", "% of datasheet", "IQR us", "n", "method"):
        t.add_column(col)
    for c in ceilings:
        r = ref.get(c.measure)
        t.add_row(c.measure, c.shown(c.value), c.unit, "-" if not r else f"{r:.0f}",
                  "-" if not r else f"{100 * c.value / r:.0f}", c.shown(c.summary.iqr_us), str(c.summary.n), c.method)
    console.print(t)
    console.print(f"stored in {store.where}")
