"""`kernelbench inspect [OP ...] --target sm_120|sm_90`: compile every Triton implementation (and, with
--all-configs, every config of its space) for the target without a GPU, and report shared memory,
registers, the programs (and warps) one SM of the target holds at once, spills, tensor-core instructions and the SASS's
size in instructions (a kernel's code, not what one thread runs: loops run theirs many times); with --loop-loads, the
plain global loads inside each kernel's loops that are read in their own iteration (harness/sass_loops.py). Exit
status 1 when any kernel does not fit."""
from __future__ import annotations

import json
import sys

import click
from rich.console import Console
from rich.table import Table

from kernelbench.harness import inspector
from kernelbench.usage import shape_set_option


@click.command("inspect")
@click.argument("ops", nargs=-1)
@click.option("--target", type=click.Choice(sorted(inspector.TARGETS)), default="sm_120", show_default=True)
@click.option("--shapes", "shape_set", default="flash-tp8", show_default=True, callback=shape_set_option)
@click.option("--batch", "batches", multiple=True, type=click.IntRange(min=1), help="only these batch sizes C")
@click.option("--all-configs", is_flag=True, help="every config of each impl's space, not only the default")
@click.option("--impl", "impl_names", multiple=True, help="only these implementations")
@click.option("--module", "modules", multiple=True, help="a user kernel module (path or dotted name) to load")
@click.option("--json", "json_out", default=None, help="write the reports as JSON (kernelbench gate --inspect)")
@click.option("--loop-loads", is_flag=True,
              help="also list, per kernel, the plain global loads inside its loops read in their own iteration "
                   "(instructions to the first reader, from the SASS) and how many are read a step later")
def command(ops, target, shape_set, batches, all_configs, impl_names, modules, json_out, loop_loads):
    """Compile Triton kernels for sm_120 (or sm_90) and report resources and tensor-core use."""
    try:
        reports = inspector.inspect_impls(list(ops) or None, shape_set=shape_set, target=target,
                                          all_configs=all_configs, modules=tuple(modules),
                                          batches=tuple(batches) or None, impl_names=tuple(impl_names),
                                          progress=True)
    except inspector.InspectorError as e:
        raise click.ClickException(str(e)) from None
    limit = inspector.SMEM_LIMIT[inspector.TARGETS[target]]
    t = Table(title=f"Triton kernels compiled for {target} (shared memory limit {limit} bytes)")
    for col in ("op", "impl", "shape", "config", "kernel", "smem B", "regs", "per SM", "SASS", "spill",
                "tensor cores", "problems"):
        t.add_column(col)
    bad = 0
    for r in reports:
        bad += bool(r["problems"])
        cfg = json.dumps(r["config"], sort_keys=True, separators=(",", ":"))
        kernels = r["kernels"] or [None]
        for i, k in enumerate(kernels):
            first = i == 0
            t.add_row(r["op"] if first else "", r["impl"] if first else "", r["label"][:40] if first else "",
                      cfg[:50] if first else "", "-" if k is None else k["kernel"].split(":")[-1],
                      "-" if k is None else str(k["shared_bytes"]), "-" if k is None else str(k["registers"]),
                      "-" if k is None else _per_sm(k),
                      "-" if k is None else str(k.get("sass_instructions", "")),
                      "-" if k is None else ("yes" if k["spills"] else "no"),
                      "-" if k is None else (",".join(k["sass_mma"] or k["ptx_mma"])[:40] or "none (SIMT)"),
                      "; ".join(r["problems"])[:90] if first else "")
    Console(width=240).print(t)
    if loop_loads:
        Console(width=240).print(_loop_load_table(reports, target))
    if json_out:
        with open(json_out, "w") as f:
            json.dump({"target": target, "shape_set": shape_set, "reports": reports}, f, indent=1, default=str)
    click.echo(f"{len(reports)} implementation/shape/config combinations, {bad} with problems")
    if not reports:   # nothing inspected is not a pass
        click.echo("no Triton implementation/shape combination was inspected (no Triton implementation for these "
                   "ops, or no case at these --batch sizes)", err=True)
        sys.exit(1)
    sys.exit(1 if bad else 0)


def _loop_load_table(reports: list[dict], target: str) -> Table:
    """One row per compiled kernel with loads in its loops: those read in their own iteration (nearest reader first,
    "opcode@address+distance"), and the count read in the next."""
    t = Table(title=f"Plain global loads inside loops ({target} SASS): read in their own iteration, instructions to "
                    f"the first reader (a copy at the loop's end counts: it waits too)")
    for col in ("op", "impl", "shape", "kernel", "in step", "nearest", "loads read in step (opcode@addr+distance)",
                "a step ahead"):
        t.add_column(col)
    for r in reports:
        for k in r["kernels"]:
            found = k.get("loop_loads") or {}
            step = found.get("in_step", [])
            if not step and not found.get("ahead"):
                continue
            t.add_row(r["op"], r["impl"], r["label"][:40], k["kernel"].split(":")[-1], str(len(step)),
                      str(step[0][2]) if step else "-",
                      " ".join(f"{op}@{addr}+{d}" for addr, op, d in step[:4]) + (" ..." if len(step) > 4 else ""),
                      str(found.get("ahead", 0)))
    return t


def _per_sm(k: dict) -> str:
    """Programs one SM holds at once and their warps ("2 x 4w"); "-" when unknown."""
    n = k.get("programs_per_sm", 0)
    return f"{n} x {k['num_warps']}w" if n else "-"
