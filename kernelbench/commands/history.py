"""`kernelbench history OP`: how an op's time moved across commits on a device (table, optional plot)."""
from __future__ import annotations

import click
from rich.console import Console

from kernelbench.harness import history as h


@click.command("history")
@click.argument("op")
@click.option("--device", default=None, help="GPU name as stored (default: every device)")
@click.option("--impl", default=None, help="one implementation only")
@click.option("--png", default=None, help="write a plot here")
@click.option("--db", default=None, help="database URL (default $KERNELBENCH_DB or the user data dir)")
def command(op, device, impl, png, db):
    """Median time of OP per git commit, per implementation and shape."""
    from kernelbench.commands._common import open_store
    store = open_store(db)
    commits, series = h.load(store, op, device, impl)
    if not series:
        from kernelbench import registry
        known = {spec.name for spec in registry.ops()}
        if op not in known:
            raise click.ClickException(f"unknown op {op!r} (no bench results either); registered ops: "
                                       f"{', '.join(sorted(known))}")
        raise click.ClickException(f"no bench results for {op!r}{' on ' + device if device else ''} in {store.where}; "
                                   "run `kernelbench bench` first")
    Console(width=220).print(h.table(op, commits, series))
    if png:
        h.plot(op, commits, series, png)
        click.echo(f"plot written to {png}")
