"""`kernelbench make-checkpoint DIR`: a random checkpoint of a configuration in the official layout."""
from __future__ import annotations

import click
from rich.console import Console

from kernelbench.decoder import checkpoint
from kernelbench.config import CONFIGS, ModelConfig
from kernelbench.usage import UsageProblem


@click.command("make-checkpoint")
@click.argument("directory", type=click.Path(file_okay=False))
@click.option("--config", "config", default="tiny", show_default=True, type=click.Choice(sorted(CONFIGS)),
              help="model configuration (flash and pro are hundreds of GB)")
@click.option("--seed", default=0, show_default=True, help="random seed of the weights")
@click.option("--shards", default=4, show_default=True, type=click.IntRange(min=1),
              help="number of safetensors shard files")
@click.option("--force", is_flag=True, help="write into a non-empty directory")
@click.option("--yes", is_flag=True, help="write a checkpoint over 10 GB (flash, pro)")
@click.option("--layers", type=int, default=None, help="keep only the first N layers (widths unchanged)")
@click.option("--experts", type=int, default=None, help="routed experts per layer (default: the config's)")
@click.option("--vocab", type=int, default=None, help="vocabulary size (default: the config's)")
def command(directory: str, config: str, seed: int, shards: int, force: bool, yes: bool, layers, experts, vocab):
    """Write a random DeepSeek-V4 checkpoint (config.json, index, FP8/FP4 safetensors shards) to DIRECTORY."""
    try:
        path = checkpoint.make_random(directory, config, seed, shards, force, yes, layers, experts, vocab)
    except UsageProblem as e:
        raise click.UsageError(str(e)) from None
    files = sorted(path.glob("*.safetensors"))
    size = sum(f.stat().st_size for f in files)
    n = len(checkpoint.read_index(path))
    Console().print(f"[green]wrote[/] {path}: config {ModelConfig.load(path).name!r}, seed {seed}, {n} tensors in {len(files)} shards, "
                    f"{size / 1e6:.1f} MB")
