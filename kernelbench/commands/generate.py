"""`kernelbench generate`: load (or build) an official-format checkpoint, prefill a ragged batch of
prompts, decode tokens with the reference model or the Triton decoder, at any TP degree. The work is in
kernelbench/decoder/generate.py; this is the command line.

    kernelbench generate                                   # tiny random checkpoint in a temp dir, CPU
    kernelbench generate --checkpoint ck/ --impl triton    # TRITON_INTERPRET=1 on a CPU
    kernelbench generate --tp 2                            # 2 CPU processes, gloo
    torchrun --nproc-per-node 8 -m kernelbench generate --checkpoint DIR --device cuda --tp 8
"""
from __future__ import annotations

import math
import os
import shutil

import click
import torch
from rich.console import Console
from rich.table import Table

from kernelbench.config import CONFIGS
from kernelbench.decoder.generate import (GenerateOptions, GenerateResult, check_fits, generate,
                                          prepare_checkpoint)
from kernelbench.usage import UsageProblem


def report(res: GenerateResult, opts: GenerateOptions, console: Console) -> None:
    table = Table(title=f"generate: {res.config}, impl {opts.impl}, TP{res.tp}, {opts.device}")
    table.add_column("seq", justify="right")
    table.add_column("prompt", justify="right")
    table.add_column("generated tokens")
    for b, (p, t) in enumerate(zip(res.prompts, res.tokens)):
        table.add_row(str(b), str(len(p)), " ".join(map(str, t)))
    console.print(table)
    steps = res.decode_s
    step_ms = 1e3 * sorted(steps)[len(steps) // 2] if steps else math.nan
    msg = (f"prefill {1e3 * res.prefill_s:.0f} ms for {sum(map(len, res.prompts))} prompt tokens; "
           f"decode median {step_ms:.1f} ms/step at batch {opts.batch} "
           f"({1e3 * opts.batch / step_ms if steps else math.nan:.1f} tokens/s)")
    console.print(msg)
    if res.mtp_tries:
        console.print(f"MTP draft agreed with the next token {res.mtp_hits}/{res.mtp_tries} times "
                      f"(random weights: expect ~chance)")
    if res.fallbacks:
        console.print(f"[yellow]ops without a {opts.impl} kernel ran their reference:[/] {', '.join(res.fallbacks)}")
    console.print("[green]logits finite[/]" if res.finite else "[red]non-finite logits[/]")


@click.command("generate")
@click.option("--checkpoint", "ckpt", type=click.Path(file_okay=False), default=None,
              help="checkpoint directory; created with random weights if missing or empty (default: a temp dir)")
@click.option("--config", "config", default="tiny", show_default=True, type=click.Choice(sorted(CONFIGS)),
              help="configuration of a checkpoint built here")
@click.option("--impl", default="reference", show_default=True, type=click.Choice(["reference", "triton"]))
@click.option("--tp", default=1, show_default=True, help="tensor-parallel degree")
@click.option("--batch", default=2, show_default=True, help="number of sequences (prompts of different lengths)")
@click.option("--prompt-len", default=24, show_default=True, help="length of the first prompt (+3 per sequence)")
@click.option("--steps", default=8, show_default=True, help="tokens to generate per sequence")
@click.option("--temperature", default=0.0, show_default=True, help="0 = greedy, else Gumbel-max sampling")
@click.option("--seed", default=0, show_default=True)
@click.option("--device", default="cpu", show_default=True)
@click.option("--mtp/--no-mtp", default=True, show_default=True, help="run the MTP draft head beside decoding")
def command(ckpt, config, impl, tp, batch, prompt_len, steps, temperature, seed, device, mtp):
    """Prefill prompts and decode tokens from a DeepSeek-V4 checkpoint (reference model or Triton decoder)."""
    if batch < 1 or steps < 1 or prompt_len < 1 or tp < 1:
        raise click.UsageError("--batch, --steps, --prompt-len and --tp must be >= 1")
    if impl == "triton" and device == "cpu" and os.environ.get("TRITON_INTERPRET") != "1":
        raise click.UsageError("--impl triton on a CPU needs TRITON_INTERPRET=1 (the Triton interpreter)")
    if not temperature >= 0 or temperature == float("inf"):
        raise click.UsageError(f"--temperature {temperature}: must be a finite number >= 0 (0 = greedy)")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise click.UsageError(f"--device {device}: no CUDA GPU is visible; use --device cpu")
    if device != "cpu" and not device.startswith("cuda"):
        raise click.UsageError(f"--device {device!r}: use cpu or cuda")
    if impl == "triton":   # a malformed pinned config or tuned-config file is the user's to fix, before any work
        from kernelbench.usage import check_settings
        check_settings()
    try:
        path = prepare_checkpoint(ckpt, config, seed)
    except UsageProblem as e:
        raise click.UsageError(str(e)) from None
    temporary = ckpt is None          # built in a temp dir for this run: removed at the end
    try:
        opts = GenerateOptions(str(path), impl, batch, prompt_len, steps, temperature, seed, device, mtp,
                               progress=True)
        check_fits(opts, tp)
        res = generate(opts, tp)
    except UsageProblem as e:
        raise click.UsageError(str(e)) from None
    finally:
        if temporary:    # each rank built its own
            shutil.rmtree(path.parent, ignore_errors=True)
    if int(os.environ.get("RANK", "0")) == 0:
        console = Console()
        console.print(f"checkpoint {path}" + (" (temporary, removed; --checkpoint DIR keeps one)" if temporary else ""))
        report(res, opts, console)
    if not res.finite:
        raise SystemExit(1)
