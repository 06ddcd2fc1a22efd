"""`kernelbench roofline`: every op and shape against the roofline of a device: calibrated ceilings
and the newest bench results from the database, or a datasheet device's floors (the RTX PRO 6000
our users run) before anyone owns the card."""
from __future__ import annotations

import json

import click
from rich.console import Console

from kernelbench import registry
from kernelbench.harness import roofline as rl
from kernelbench.usage import shape_set_option


@click.command("roofline")
@click.argument("ops", nargs=-1)
@click.option("--device", default=None,
              help="device name or alias (h200, rtx-pro-6000, ...); default: this GPU, else the newest benched")
@click.option("--shapes", "shape_set", default="flash-tp8", show_default=True, callback=shape_set_option,
              help="shape set for floors of ops without results")
@click.option("--floors", is_flag=True, help="list every op and shape of the shape set (floors), not only measured ones")
@click.option("--png", default=None, help="write the roofline plot here")
@click.option("--json", "json_out", default=None, help="write the points as JSON")
@click.option("--db", default=None, help="database URL (default $KERNELBENCH_DB or the user data dir)")
def command(ops, device, shape_set, floors, png, json_out, db):
    """Arithmetic intensity, bound, floor time and achieved fraction of the ceiling per op and shape."""
    from kernelbench.harness import calibrate, devices
    from kernelbench.commands._common import open_store
    from kernelbench.tuned_configs import current_device
    store = open_store(db)
    if device:
        spec = devices.find(device)
        device = spec.name if spec else device
    else:
        device = current_device()
        if device == "cpu":
            rows = rl.latest_bench(store)
            device = rows[-1]["device"] if rows else "NVIDIA RTX PRO 6000 Blackwell Workstation Edition"
    try:
        ceil = rl.ceilings_for(device, calibrate.load_ceilings(store, gpu_name=device))
    except ValueError as e:
        raise click.ClickException(str(e)) from None
    points = []
    for r in rl.latest_bench(store, device, list(ops) or None):
        points.append(rl.point(r["op"], r["impl"], r["label"], r["flops"], r["bytes"], ceil, r["median_us"]))
    if floors or not points:
        seen = {(p.op, p.label) for p in points}
        for spec in registry.ops(list(ops) or None):
            for params in spec.shape_cases(shape_set):
                label = spec.label(params)
                if (spec.name, label) not in seen:
                    c = spec.cost(params)
                    points.append(rl.point(spec.name, "-", label, c.flops, c.bytes, ceil))
    points.sort(key=lambda p: (p.op, p.label, p.impl))
    Console(width=220).print(rl.table(points, ceil))
    if json_out:
        with open(json_out, "w") as f:
            json.dump({"device": device, "ceilings": ceil.__dict__, "points": [p.as_dict() for p in points]}, f, indent=1)
    if png:
        rl.plot(points, ceil, png)
        click.echo(f"plot written to {png}")
