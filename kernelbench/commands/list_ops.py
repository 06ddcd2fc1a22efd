"""`kernelbench list`: every registered op with its implementations, shapes and roofline counts."""
from __future__ import annotations

import click
from rich.console import Console
from rich.table import Table

from kernelbench import registry
from kernelbench.config import get_shape_set
from kernelbench.usage import shape_set_option


def op_rows(shape_set: str) -> list[dict]:
    ss = get_shape_set(shape_set)
    rows = []
    for spec in registry.ops():
        impl_names = ",".join(sorted(registry.impls(spec.name)))
        for params in spec.shape_cases(ss):
            c = spec.cost(params)
            rows.append({"op": spec.name, "family": spec.family, "impls": impl_names, "shape": spec.label(params),
                         "flops": c.flops, "bytes": c.bytes, "intensity": c.intensity})
    return rows


@click.command("list")
@click.option("--shapes", "shape_set", default="flash-tp8", show_default=True, callback=shape_set_option, help="shape set (flash-tp8, flash-tp1, pro-tp8, ...)")
def command(shape_set: str):
    """List every op, its implementations, and its FLOP and byte counts at the chosen shapes."""
    table = Table(title=f"ops at {shape_set} shapes")
    for col in ("op", "family", "impls", "shape", "MFLOP", "MB", "FLOP/B"):
        table.add_column(col, justify="right" if col in ("MFLOP", "MB", "FLOP/B") else "left")
    for r in op_rows(shape_set):
        table.add_row(r["op"], r["family"], r["impls"], r["shape"], f"{r['flops'] / 1e6:.3f}",
                      f"{r['bytes'] / 1e6:.3f}", f"{r['intensity']:.2f}")
    Console(width=200).print(table)
