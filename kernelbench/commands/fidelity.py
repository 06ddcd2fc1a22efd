"""`kernelbench fidelity`: our decoder against DeepSeek's official inference code (kernelbench/decoder/fidelity.py).

    kernelbench make-checkpoint ck/ --config tiny
    kernelbench fidelity --official PATH/inference --checkpoint ck/                       # CPU, reference
    TRITON_INTERPRET=1 kernelbench fidelity --official PATH/inference --checkpoint ck/ --impl triton --steps 4
    kernelbench fidelity --official PATH/inference --checkpoint ck/ --mode modules        # op by op
    kernelbench fidelity --official PATH/inference --checkpoint ck/ --device cuda --impl triton   # TileLang

PATH/inference is the folder shipped with every DeepSeek-V4 checkpoint (model.py, kernel.py); it is
never part of this repository. Its TileLang kernels run as shipped on a GPU with `tilelang` installed;
elsewhere (or with --kernels substitute) pure-PyTorch stand-ins written from the kernels' documented
semantics replace them (kernelbench/decoder/official_kernels.py).
"""
from __future__ import annotations

import json
import os
import shlex
import sys
from dataclasses import asdict

import click
import torch
from rich.console import Console
from rich.table import Table


@click.command("fidelity")
@click.option("--official", "official_dir", required=True, type=click.Path(file_okay=False),
              help="DeepSeek-V4's inference/ folder (model.py, kernel.py)")
@click.option("--checkpoint", "ckpt", required=True, type=click.Path(file_okay=False),
              help="checkpoint directory in the official layout (kernelbench make-checkpoint writes one)")
@click.option("--impl", default="reference", show_default=True, type=click.Choice(["reference", "triton"]))
@click.option("--device", default="cpu", show_default=True)
@click.option("--kernels", default="auto", show_default=True, type=click.Choice(["auto", "official", "substitute"]),
              help="official kernel.py (TileLang, GPU) or the pure-PyTorch substitutes; auto: official on a GPU "
                   "with tilelang installed")
@click.option("--mode", default="model", show_default=True, type=click.Choice(["model", "modules"]))
@click.option("--prompts", default=3, show_default=True, type=click.IntRange(1))
@click.option("--prefill", default=64, show_default=True, type=click.IntRange(1), help="prompt length")
@click.option("--steps", default=16, show_default=True, type=click.IntRange(0), help="decode steps after the prefill")
@click.option("--gap", default=0.05, show_default=True, type=click.FloatRange(0),
              help="top-1 counts where the official (top1 - top2) / |top1| exceeds this")
@click.option("--seed", default=0, show_default=True, type=int, help="seed of the random prompts")
@click.option("--db", default=None, help="database URL (default: KERNELBENCH_DB or the user database)")
@click.option("--json", "json_path", default=None, type=click.Path(dir_okay=False), help="write the results here")
def command(official_dir, ckpt, impl, device, kernels, mode, prompts, prefill, steps, gap, seed, db, json_path):
    """Compare our decoder with DeepSeek's official inference code on one checkpoint."""
    from kernelbench.decoder import fidelity
    from kernelbench.decoder.official import OfficialError, tilelang_available

    if impl == "triton" and device == "cpu" and os.environ.get("TRITON_INTERPRET") != "1":
        raise click.UsageError("--impl triton on a CPU needs TRITON_INTERPRET=1 (the Triton interpreter)")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise click.UsageError(f"--device {device}: no CUDA device here")
    console = Console(width=150)
    if kernels == "official" and not tilelang_available():
        raise click.UsageError("--kernels official needs the `tilelang` package (pip install tilelang==0.1.8)")
    if kernels == "auto":
        kernels = "official" if device.startswith("cuda") and tilelang_available() else "substitute"
        if device.startswith("cuda") and kernels == "substitute":
            console.print("[yellow]tilelang is not installed: the official model runs with kernelbench's "
                          "pure-PyTorch kernel substitutes, not DeepSeek's TileLang kernels[/yellow]")
    seq_len = prefill + steps + 1
    try:
        s = fidelity.setup(official_dir, ckpt, impl, device, kernels, max_batch=prompts, max_seq_len=seq_len)
        if mode == "model":
            rep = fidelity.run_model_mode(s, prompts, prefill, steps, gap, seed)
            mods = None
        else:
            rep = None
            mods = fidelity.run_modules_mode(s, prompts, prefill, seed)
    except OfficialError as e:
        raise click.ClickException(str(e)) from None
    head = (f"config {s.cfg.name}, official kernels: {s.kernels}, ours: {impl} on {device}, "
            f"official code {s.source_hash}")
    console.print(head)
    for line in fidelity.caveats(s.cfg, prompts, prefill, steps if mode == "model" else 0, device):
        console.print(f"[yellow]caveat: {line}[/yellow]")
    if rep is not None:
        _print_model(console, rep)
    else:
        _print_modules(console, mods)
    command_line = "kernelbench " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    try:
        run_id = fidelity.store_results(db, s, command_line, rep, mods)
        console.print(f"stored as verify_run {run_id} (profile 'fidelity')")
    except Exception as e:            # a database problem must not lose the printed numbers
        console.print(f"[red]not stored: {e}[/red]")
    if json_path:
        with open(json_path, "w") as f:
            json.dump({"setup": head, "model": rep.as_dict() if rep else None,
                       "modules": [asdict(m) for m in mods] if mods else None}, f, indent=1)


def _print_model(console: Console, rep) -> None:
    t = Table(title=f"{rep.prompts} prompts x {rep.prefill} tokens, {rep.steps} greedy steps "
                    f"(ours teacher-forced); top-1 where gap > {rep.gap:g}")
    for c in ("comparison with the official model", "median step rel. err", "max", "top-1 agreement", "decisive"):
        t.add_column(c)
    for a in (rep.floor, rep.ours):
        t.add_row(a.name, f"{a.median:.4g}", f"{a.max:.4g}", f"{100 * a.top1:.1f}%", f"{a.n_decisive}/{a.n}")
    console.print(t)
    v = rep.verdict
    if rep.floor.median == 0:
        console.print("[yellow]noise floor 0: fp64 accumulation changed no bf16 GEMM output in this run (short "
                      "reductions); the ratio is undefined, judge by the errors and --mode modules[/yellow]")
    colour = "green" if v.passed else "red"
    console.print(f"[{colour}]ours = {v.ratio:.2f}x the noise floor (goal <= 1.25x); top-1 {v.top1_points:+.1f} "
                  f"points below the floor's (goal <= 2): {'PASS' if v.passed else 'FAIL'}[/{colour}]")
    console.print("per-step median rel. err (step 0 = prefill): floor "
                  + " ".join(f"{x:.3g}" for x in rep.floor.per_step_median) + " | ours "
                  + " ".join(f"{x:.3g}" for x in rep.ours.per_step_median))
    console.print("seconds: " + ", ".join(f"{k} {v:.1f}" for k, v in rep.elapsed_s.items()))
    console.print(f"shared-expert SwiGLU clamp (ours clamps, this official code may not): {rep.shared_clamp_hits} of "
                  f"{rep.shared_clamp_values} official gate/up values beyond the limit")


def _print_modules(console: Console, mods) -> None:
    from kernelbench.decoder.fidelity import first_departure

    t = Table(title="official modules on the official inputs, through our ops")
    for c in ("official module", "our op (its tolerance)", "output", "rel_fro", "tol rel_fro", "outside", "ok"):
        t.add_column(c)
    for r in mods:
        t.add_row(r.module, r.op, r.output, f"{r.rel_fro:.3g}", f"{r.tol_rel_fro:.3g}",
                  f"{r.mismatches}/{r.numel} (<= {r.allowed})", "[green]yes[/green]" if r.passed else "[red]NO[/red]")
    console.print(t)
    bad = first_departure(mods)
    if bad is None:
        console.print(f"[green]all {len(mods)} module outputs within their ops' tolerances[/green]")
    else:
        n = sum(not r.passed for r in mods)
        console.print(f"[red]first departure: {bad.module} ({bad.op} {bad.output}: rel_fro {bad.rel_fro:.3g}, "
                      f"{bad.mismatches} elements outside); {n} of {len(mods)} outside[/red]")
