"""`kernelbench report`: one page from the database (kernelbench/harness/report.py): decode table with
tokens/s, scaling plots, per-op stacked bars, roofline chart, verify status of every kernel, the
gate's verdict and the device fingerprint.

    kernelbench report --out report.html                     # self-contained HTML (plots inlined)
    kernelbench report --out docs/perf/report.md --gate kb-ci/gate.json   # Markdown + PNGs beside it
"""
from __future__ import annotations

import click


@click.command("report")
@click.option("--out", "out_path", default="kernelbench-report.html", show_default=True,
              help="the page: .html (self-contained) or .md (PNGs written beside it)")
@click.option("--db", "db_url", default=None, help="database URL (default $KERNELBENCH_DB or the user data dir)")
@click.option("--gate", "gate_path", default=None, type=click.Path(dir_okay=False),
              help="a `kernelbench gate --json` file whose verdict the page shows")
@click.option("--run-tag", default=None, help="the decode-bench run to show (default: the newest)")
@click.option("--no-plots", is_flag=True, help="tables only")
def command(out_path, db_url, gate_path, run_tag, no_plots):
    """Write one report page from the database."""
    from kernelbench.harness import report
    from kernelbench.commands._common import open_store
    store = open_store(db_url)
    try:
        sections = report.build(store, gate_path=gate_path, run_tag=run_tag, plots=not no_plots)
        path = report.write(sections, out_path)
    except report.ReportError as e:
        raise click.ClickException(str(e)) from None
    if not no_plots and report._plt() is None:
        click.echo("matplotlib is not installed: the page has tables only (pip install matplotlib for the plots)")
    click.echo(f"report written to {path}")
