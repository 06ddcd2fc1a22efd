"""`kernelbench make-checkpoint DIR`: a random checkpoint of a configuration in the official layout."""
from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import click
from rich.console import Console

from kernelbench import checkpoint
from kernelbench.config import CONFIGS, ModelConfig, get_config


def cut_config(cfg: ModelConfig, layers: int | None = None, experts: int | None = None,
               vocab: int | None = None) -> ModelConfig:
    """cfg with its widths kept and fewer layers (the first `layers`, plus the MTP layers), routed
    experts or vocabulary entries: a CPU-sized checkpoint with real GEMM reductions (issue 11's noise
    floor). The name records the cut (e.g. flash-l4-e16-v8192)."""
    if layers is None and experts is None and vocab is None:
        return cfg
    n = cfg.n_layers if layers is None else layers
    e = cfg.n_routed_experts if experts is None else experts
    if not 1 <= n <= cfg.n_layers:
        raise click.UsageError(f"--layers must lie in [1, {cfg.n_layers}] for {cfg.name!r}, got {n}")
    if e < cfg.n_activated_experts:
        raise click.UsageError(f"--experts must be >= the {cfg.n_activated_experts} activated experts, got {e}")
    if vocab is not None and vocab < 2:
        raise click.UsageError(f"--vocab must be >= 2, got {vocab}")
    tag = "".join(f"-{k}{v}" for k, v in (("l", layers), ("e", experts), ("v", vocab)) if v is not None)
    mtp = cfg.compress_ratios[cfg.n_layers:]
    return dataclasses.replace(cfg, name=cfg.name + tag, n_layers=n, compress_ratios=cfg.compress_ratios[:n] + mtp,
                               n_hash_layers=min(cfg.n_hash_layers, n), n_routed_experts=e,
                               vocab_size=cfg.vocab_size if vocab is None else vocab)


def make_checkpoint(path: str | Path, config: str = "tiny", seed: int = 0, shards: int = 4,
                    force: bool = False, yes: bool = False, layers: int | None = None,
                    experts: int | None = None, vocab: int | None = None) -> Path:
    path = Path(path)
    if path.exists() and any(path.iterdir()) and not force:
        raise click.UsageError(f"{path} exists and is not empty (use --force to write into it)")
    cfg = cut_config(get_config(config), layers, experts, vocab)
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
@click.option("--layers", type=int, default=None, help="keep only the first N layers (widths unchanged)")
@click.option("--experts", type=int, default=None, help="routed experts per layer (default: the config's)")
@click.option("--vocab", type=int, default=None, help="vocabulary size (default: the config's)")
def command(directory: str, config: str, seed: int, shards: int, force: bool, yes: bool, layers, experts, vocab):
    """Write a random DeepSeek-V4 checkpoint (config.json, index, FP8/FP4 safetensors shards) to DIRECTORY."""
    path = make_checkpoint(directory, config, seed, shards, force, yes, layers, experts, vocab)
    files = sorted(path.glob("*.safetensors"))
    size = sum(f.stat().st_size for f in files)
    n = len(checkpoint.read_index(path))
    Console().print(f"[green]wrote[/] {path}: config {ModelConfig.load(path).name!r}, seed {seed}, {n} tensors in {len(files)} shards, "
                    f"{size / 1e6:.1f} MB")
