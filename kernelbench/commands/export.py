"""`kernelbench export --format FORMAT`: one bench run from the database as pytest-benchmark JSON,
github-action-benchmark `customSmallerIsBetter` JSON or Bencher Metric Format (kernelbench/harness/export.py)."""
from __future__ import annotations

import json
import sys

import click

from kernelbench.harness import export as ex


@click.command("export")
@click.option("--format", "fmt", type=click.Choice(ex.FORMATS), required=True, help="output format")
@click.option("--run-tag", default=None, help="the bench run to export (default: the newest in the database)")
@click.option("--op", "ops", multiple=True, help="only these ops")
@click.option("-o", "--output", default="-", show_default=True, help="file to write ('-': stdout)")
@click.option("--db", default=None, help="database URL (default $KERNELBENCH_DB or the user data dir)")
def command(fmt, run_tag, ops, output, db):
    """Write one bench run's results in a format a benchmark dashboard reads."""
    from kernelbench.commands._common import open_store
    store = open_store(db)
    tag, n, doc = ex.export(store, fmt, run_tag, tuple(ops))
    if n == 0:
        what = f"run {run_tag!r}" if run_tag else "any run"
        raise click.ClickException(f"no bench results for {what}{' of ' + ', '.join(ops) if ops else ''} in "
                                   f"{store.where}; run `kernelbench bench` (or a kernel_bench test) first")
    text = json.dumps(doc, indent=2, allow_nan=False)
    if output == "-":
        sys.stdout.write(text + "\n")
    else:
        with open(output, "w") as f:
            f.write(text + "\n")
        click.echo(f"{n} results of run {tag} written to {output} ({fmt})", err=True)
