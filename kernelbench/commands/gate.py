"""`kernelbench gate`: fail a CI job on a slowdown beyond noise, a verification failure, a kernel that
lost its tensor-core instructions or outgrew sm_120. Method: kernelbench/harness/gate.py; CI recipes: ci/."""
from __future__ import annotations

import json
import sys

import click

from kernelbench.harness import gate as g


@click.command("gate")
@click.option("--baseline", default=None,
              help="baseline bench results: a `bench --json` file or db:latest / db:commit=SHA / db:tag=TAG")
@click.option("--current", default=None, help="this run's bench results (same forms as --baseline)")
@click.option("--inspect", "inspect_current", default=None, help="this run's `kernelbench inspect --json` file")
@click.option("--inspect-baseline", default=None, help="the baseline's `kernelbench inspect --json` file")
@click.option("--tolerance", type=float, default=0.05, show_default=True,
              help="relative slowdown allowed before the IQR test applies")
@click.option("--strict", is_flag=True, help="a baseline result missing from the current run fails the gate")
@click.option("--db", default=None, help="database URL for db: sources")
@click.option("--markdown", "md_out", default=None, help="write a markdown summary (e.g. $GITHUB_STEP_SUMMARY)")
@click.option("--json", "json_out", default=None, help="write the findings as JSON")
def command(baseline, current, inspect_current, inspect_baseline, tolerance, strict, db, md_out, json_out):
    """Compare this run with a baseline; exit 1 on a regression."""
    if not (current or inspect_current):
        raise click.UsageError("give --current (bench results) and/or --inspect (an inspection)")
    store = None
    if any(s and s.startswith("db:") for s in (baseline, current)):
        from kernelbench.commands._common import open_store
        store = open_store(db)
    findings = []
    try:
        if current:
            cur = g.load_bench(current, store)
            base = g.load_bench(baseline, store) if baseline else []
            findings += g.coverage("bench run", cur, base, g.row_key)
            findings += g.compare_bench(base, cur, tolerance, strict)
        if inspect_current:
            cur_i = g.load_inspect(inspect_current)
            base_i = g.load_inspect(inspect_baseline) if inspect_baseline else None
            findings += g.coverage("inspection", cur_i, base_i, g._inspect_key)
            findings += g.compare_inspect(cur_i, base_i)
    except ValueError as e:
        raise click.ClickException(str(e)) from None
    passed = not any(f.fatal for f in findings)
    text = g.markdown(findings, passed)
    click.echo(text)
    if md_out:
        with open(md_out, "a") as f:
            f.write(text)
    if json_out:
        with open(json_out, "w") as f:
            json.dump({"passed": passed, "findings": [f.as_dict() for f in findings]}, f, indent=1)
    sys.exit(0 if passed else 1)
