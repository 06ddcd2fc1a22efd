"""`kernelbench generate`: load (or build) an official-format checkpoint, prefill a ragged batch of
prompts, decode tokens with the reference model or the Triton decoder, at any TP degree.

    kernelbench generate                                   # tiny random checkpoint in a temp dir, CPU
    kernelbench generate --checkpoint ck/ --impl triton    # TRITON_INTERPRET=1 on a CPU
    kernelbench generate --tp 2                            # 2 CPU processes, gloo
    torchrun --nproc-per-node 8 -m kernelbench generate --checkpoint DIR --device cuda --tp 8
"""
from __future__ import annotations

import math
import os
import shutil
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import click
import torch
from rich.console import Console
from rich.table import Table

from kernelbench.decoder import checkpoint
from kernelbench.decoder.backend import Ops
from kernelbench.config import CONFIGS, get_config
from kernelbench.decoder.model import Step, Transformer
from kernelbench.decoder.tp import TPContext, launch


@dataclass
class GenerateOptions:
    checkpoint: str
    impl: str = "reference"
    batch: int = 2
    prompt_len: int = 24
    steps: int = 8
    temperature: float = 0.0
    seed: int = 0
    device: str = "cpu"
    mtp: bool = True
    progress: bool = False     # a progress bar / log lines on stderr (rank 0)


@dataclass
class GenerateResult:
    prompts: list[list[int]]
    tokens: list[list[int]]                 # generated, per sequence
    prefill_s: float
    decode_s: list[float] = field(default_factory=list)   # per step
    mtp_hits: int = 0
    mtp_tries: int = 0
    finite: bool = True
    fallbacks: list[str] = field(default_factory=list)     # ops that ran their reference under --impl triton
    tp: int = 1
    config: str = ""


def prepare_checkpoint(path: str | None, config: str, seed: int) -> Path:
    """An existing checkpoint directory, or a new random one of `config` (in a temp dir if path is None)."""
    if path is not None and (Path(path) / "config.json").exists():
        return Path(path)
    if config != "tiny":
        raise click.UsageError(f"generate builds only tiny checkpoints; a random {config!r} one is hundreds of GB "
                               f"(kernelbench make-checkpoint --config {config} --yes writes it)")
    if path is None:
        path = Path(tempfile.mkdtemp(prefix="kb-ckpt-")) / config
    path = Path(path)
    if path.exists() and any(path.iterdir()):
        raise click.UsageError(f"{path} is neither a checkpoint (no config.json) nor empty")
    return checkpoint.write_random(path, get_config(config), seed=seed)


def check_fits(opts: GenerateOptions, tp: int) -> None:
    """Refuse, before loading weights, a TP degree the checkpoint's config does not divide and prompts
    plus generated tokens beyond its max_position_embeddings."""
    from kernelbench.config import ModelConfig
    try:
        cfg = ModelConfig.load(opts.checkpoint)
        cfg.check_tp(tp)
    except (FileNotFoundError, ValueError) as e:
        raise click.UsageError(f"--tp {tp}: {e}" if "TP=" in str(e) else f"{opts.checkpoint}: {e}") from None
    longest = opts.prompt_len + 3 * (opts.batch - 1) + opts.steps
    if longest > cfg.max_position_embeddings:
        raise click.UsageError(f"the longest sequence ({opts.prompt_len + 3 * (opts.batch - 1)} prompt tokens + "
                               f"{opts.steps} generated) exceeds the checkpoint's max_position_embeddings "
                               f"({cfg.max_position_embeddings})")


def _sample(model: Transformer, logits: torch.Tensor, temperature: float, gen: torch.Generator) -> torch.Tensor:
    t = logits.shape[0]
    temp = torch.full((t,), temperature, dtype=torch.float32, device=logits.device)
    noise = torch.empty(logits.shape, dtype=torch.float32).exponential_(generator=gen).to(logits.device)
    return model.ops.sample(logits=logits, temperature=temp, noise=noise)


def run_generate(tp: TPContext, opts: GenerateOptions) -> GenerateResult:
    """The whole job on one TP rank (every rank computes the same tokens)."""
    dev = torch.device(opts.device)
    model = Transformer.from_checkpoint(opts.checkpoint, ops=Ops(opts.impl), tp=tp, device=dev)
    cfg = model.cfg
    gen = torch.Generator().manual_seed(opts.seed)
    lens = [opts.prompt_len + 3 * b for b in range(opts.batch)]            # a ragged batch
    prompts = [torch.randint(2, cfg.vocab_size, (n,), generator=gen).to(dev) for n in lens]
    cache = model.new_cache(opts.batch, max(lens) + opts.steps + 1)
    use_mtp = opts.mtp and cfg.n_mtp_layers > 0

    from kernelbench.progress import steps as progress_steps
    show = opts.progress and tp.rank == 0
    with progress_steps(f"generate ({opts.impl}, {opts.device})", opts.batch + opts.steps - 1, show) as advance:
        return _prefill_and_decode(model, opts, prompts, lens, cache, use_mtp, gen, dev, tp, advance)


def _prefill_and_decode(model, opts, prompts, lens, cache, use_mtp, gen, dev, tp, advance) -> GenerateResult:
    cfg = model.cfg
    t0 = time.perf_counter()
    last, drafts, hits, tries, finite = [], [], 0, 0, True
    for b, ids in enumerate(prompts):
        logits, h = model.prefill(ids, b, cache)
        finite &= bool(torch.isfinite(logits).all())
        tok = _sample(model, logits[-1:], opts.temperature, gen)
        last.append(tok)
        if use_mtp:   # MTP over the prompt: streams at p with token p+1 -> a draft of the token after tok
            nxt = torch.cat([ids[1:], tok])
            step = Step(nxt, torch.arange(len(ids), device=dev), torch.full_like(ids, b), prefill=True)
            drafts.append(model.mtp_forward(h, nxt, step, cache)[-1:].argmax(-1))
        advance(f"prefilled sequence {b} ({len(ids)} tokens)")
    _sync(dev)
    result = GenerateResult([p.tolist() for p in prompts], [[int(t)] for t in last], time.perf_counter() - t0,
                            tp=tp.world, config=cfg.name)
    ids = torch.cat(last)
    positions = torch.tensor(lens, device=dev)
    seq_ids = torch.arange(opts.batch, device=dev)
    draft = torch.cat(drafts) if use_mtp else None
    for _ in range(opts.steps - 1):
        t0 = time.perf_counter()
        logits, h = model.decode(ids, positions, seq_ids, cache)
        nxt = _sample(model, logits, opts.temperature, gen)
        if use_mtp:
            hits += int((draft == nxt).sum())
            tries += opts.batch
            draft = model.mtp_forward(h, nxt, Step(nxt, positions, seq_ids), cache).argmax(-1)
        _sync(dev)
        result.decode_s.append(time.perf_counter() - t0)
        finite &= bool(torch.isfinite(logits).all())
        for b in range(opts.batch):
            result.tokens[b].append(int(nxt[b]))
        advance(f"decode step {len(result.decode_s)}")
        ids, positions = nxt, positions + 1
    result.mtp_hits, result.mtp_tries, result.finite = hits, tries, finite
    result.fallbacks = sorted(model.ops.fallbacks) if opts.impl != "reference" else []
    return result


def _sync(dev: torch.device) -> None:
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


def _rank_entry(tp: TPContext, opts_dict: dict) -> dict:
    return asdict(run_generate(tp, GenerateOptions(**opts_dict)))


def generate(opts: GenerateOptions, tp: int = 1) -> GenerateResult:
    """Run the job at TP `tp`: in this process (TP1 or under torchrun), or in `tp` CPU processes."""
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:                    # torchrun: this process is one rank
        ctx = TPContext.from_env()
        if ctx.world != tp:
            raise click.UsageError(f"--tp {tp} but torchrun started WORLD_SIZE={ctx.world} processes")
        return run_generate(ctx, opts)
    if tp == 1:
        return run_generate(TPContext(), opts)
    if opts.device != "cpu":
        raise click.UsageError("--tp > 1 on a GPU needs torchrun (one process per GPU); "
                               "without torchrun TP runs as CPU processes with gloo")
    return GenerateResult(**launch(_rank_entry, tp, args=(asdict(opts),))[0])


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
        from kernelbench.usage import check_tuning
        check_tuning()
    path = prepare_checkpoint(ckpt, config, seed)
    temporary = ckpt is None          # built in a temp dir for this run: removed at the end
    try:
        opts = GenerateOptions(str(path), impl, batch, prompt_len, steps, temperature, seed, device, mtp,
                               progress=True)
        check_fits(opts, tp)
        res = generate(opts, tp)
    finally:
        if temporary:    # each rank built its own
            shutil.rmtree(path.parent, ignore_errors=True)
    if int(os.environ.get("RANK", "0")) == 0:
        console = Console()
        console.print(f"checkpoint {path}" + (" (temporary, removed; --checkpoint DIR keeps one)" if temporary else ""))
        report(res, opts, console)
    if not res.finite:
        raise SystemExit(1)
