"""Generation with the decoder (`kernelbench generate`): load (or build) an official-format checkpoint,
prefill a ragged batch of prompts, decode tokens with the reference model or the Triton decoder, at any
TP degree. Usage problems (a checkpoint that does not fit, a TP layout without torchrun) raise
kernelbench.usage.UsageProblem before any weight is loaded.

    kernelbench generate                                   # tiny random checkpoint in a temp dir, CPU
    kernelbench generate --checkpoint ck/ --impl triton    # TRITON_INTERPRET=1 on a CPU
    kernelbench generate --tp 2                            # 2 CPU processes, gloo
    torchrun --nproc-per-node 8 -m kernelbench generate --checkpoint DIR --device cuda --tp 8
"""
from __future__ import annotations

import os
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

from kernelbench.decoder import checkpoint
from kernelbench.decoder.backend import Ops
from kernelbench.config import get_config
from kernelbench.decoder.model import Step, Transformer
from kernelbench.decoder.tp import TPContext, launch
from kernelbench.harness.timing import sync
from kernelbench.usage import UsageProblem


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
        raise UsageProblem(f"generate builds only tiny checkpoints; a random {config!r} one is hundreds of GB "
                               f"(kernelbench make-checkpoint --config {config} --yes writes it)")
    if path is None:
        path = Path(tempfile.mkdtemp(prefix="kb-ckpt-")) / config
    path = Path(path)
    if path.exists() and any(path.iterdir()):
        raise UsageProblem(f"{path} is neither a checkpoint (no config.json) nor empty")
    return checkpoint.write_random(path, get_config(config), seed=seed)


def check_fits(opts: GenerateOptions, tp: int) -> None:
    """Refuse, before loading weights, a TP degree the checkpoint's config does not divide and prompts
    plus generated tokens beyond its max_position_embeddings."""
    from kernelbench.config import ModelConfig
    try:
        cfg = ModelConfig.load(opts.checkpoint)
        cfg.check_tp(tp)
    except (FileNotFoundError, ValueError) as e:
        raise UsageProblem(f"--tp {tp}: {e}" if "TP=" in str(e) else f"{opts.checkpoint}: {e}") from None
    longest = opts.prompt_len + 3 * (opts.batch - 1) + opts.steps
    if longest > cfg.max_position_embeddings:
        raise UsageProblem(f"the longest sequence ({opts.prompt_len + 3 * (opts.batch - 1)} prompt tokens + "
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
    sync(dev)
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
        sync(dev)
        result.decode_s.append(time.perf_counter() - t0)
        finite &= bool(torch.isfinite(logits).all())
        for b in range(opts.batch):
            result.tokens[b].append(int(nxt[b]))
        advance(f"decode step {len(result.decode_s)}")
        ids, positions = nxt, positions + 1
    result.mtp_hits, result.mtp_tries, result.finite = hits, tries, finite
    result.fallbacks = sorted(model.ops.fallbacks) if opts.impl != "reference" else []
    return result


def _rank_entry(tp: TPContext, opts_dict: dict) -> dict:
    return asdict(run_generate(tp, GenerateOptions(**opts_dict)))


def generate(opts: GenerateOptions, tp: int = 1) -> GenerateResult:
    """Run the job at TP `tp`: in this process (TP1 or under torchrun), or in `tp` CPU processes."""
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:                    # torchrun: this process is one rank
        ctx = TPContext.from_env()
        if ctx.world != tp:
            raise UsageProblem(f"--tp {tp} but torchrun started WORLD_SIZE={ctx.world} processes")
        return run_generate(ctx, opts)
    if tp == 1:
        return run_generate(TPContext(), opts)
    if opts.device != "cpu":
        raise UsageProblem("--tp > 1 on a GPU needs torchrun (one process per GPU); "
                               "without torchrun TP runs as CPU processes with gloo")
    return GenerateResult(**launch(_rank_entry, tp, args=(asdict(opts),))[0])
