"""`kernelbench make-checkpoint DIR`: a random checkpoint of a configuration in the official layout."""
from __future__ import annotations

import math
from pathlib import Path

import click
from rich.console import Console

from kernelbench.decoder import checkpoint
from kernelbench.config import CONFIGS, get_config


def make_checkpoint(path: str | Path, config: str = "tiny", seed: int = 0, shards: int = 4,
                    force: bool = False, yes: bool = False) -> Path:
    path = Path(path)
    if path.exists() and any(path.iterdir()) and not force:
        raise click.UsageError(f"{path} exists and is not empty (use --force to write into it)")
    cfg = get_config(config)
    size = sum(math.prod(s.shape) * s.dtype.itemsize for s in checkpoint.param_specs(cfg).values())
    if size > 10e9 and not yes:
        raise click.UsageError(f"a {config!r} checkpoint is {size / 1e9:.0f} GB (held in memory while written); "
                               f"pass --yes to write it anyway")
    return checkpoint.write_random(path, cfg, seed=seed, n_shards=shards)


@click.command("make-checkpoint")
@click.argument("directory", type=click.Path(file_okay=False))
@click.option("--config", "config", default="tiny", show_default=True, type=click.Choice(sorted(CONFIGS)),
              help="model configuration (flash and pro are hundreds of GB)")
@click.option("--seed", default=0, show_default=True, help="random seed of the weights")
@click.option("--shards", default=4, show_default=True, type=click.IntRange(min=1),
              help="number of safetensors shard files")
@click.option("--force", is_flag=True, help="write into a non-empty directory")
@click.option("--yes", is_flag=True, help="write a checkpoint over 10 GB (flash, pro)")
def command(directory: str, config: str, seed: int, shards: int, force: bool, yes: bool):
    """Write a random DeepSeek-V4 checkpoint (config.json, index, FP8/FP4 safetensors shards) to DIRECTORY."""
    path = make_checkpoint(directory, config, seed, shards, force, yes)
    files = sorted(path.glob("*.safetensors"))
    size = sum(f.stat().st_size for f in files)
    n = len(checkpoint.read_index(path))
    Console().print(f"[green]wrote[/] {path}: config {config!r}, seed {seed}, {n} tensors in {len(files)} shards, "
                    f"{size / 1e6:.1f} MB")
