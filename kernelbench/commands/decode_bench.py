"""`kernelbench decode-bench`: decode step time against the number of concurrent requests C, fitted
as step = a + b*C, so per-request cost that batching does not amortize shows up (the users measured
40 ms + 31 ms x N on 8 GPUs: an indexer that scored the whole max context on every step; CONTEXT.md).

    kernelbench decode-bench                                 # tiny model, CPU, reference ops
    kernelbench decode-bench --device cuda --impl triton     # Flash-width layers (SWA, CSA, HCA, CSA),
                                                             # TP8 rank-0 shapes on one GPU, CUDA graph
    kernelbench decode-bench --device cuda --capacity 65536  # same context, 128x the cache capacity:
                                                             # the step time must not move
    torchrun --nproc-per-node 8 -m kernelbench decode-bench --device cuda --impl triton   # real TP8

On one GPU the TP8 per-rank shapes run with the collectives skipped (NCCL was ~2% of the users' GPU
time). Weights are random (drawn on the device); caches are filled with random values and every
sequence starts at `--context` tokens, so no prefill is needed. Step time depends on shapes and
lengths, not on the values.
"""
from __future__ import annotations

import json
import math
import os
import statistics
import time
from dataclasses import asdict, dataclass, field

import click
import torch
from rich.console import Console
from rich.table import Table

from kernelbench import checkpoint
from kernelbench.backend import Ops
from kernelbench.config import FLASH, PRO, TINY, ModelConfig
from kernelbench.model import Transformer
from kernelbench.tp import TPContext

KIND_RATIO = {"swa": 0, "csa": 4, "hca": 128}


@dataclass
class BenchPoint:
    batch: int
    step_ms: float                       # median over the timed steps
    p10_ms: float
    p90_ms: float
    tokens_per_s: float


@dataclass
class BenchResult:
    config: str
    impl: str
    device: str
    tp: int
    simulated_tp: bool
    context: int
    capacity: int
    graph: bool
    graph_error: str = ""
    points: list[BenchPoint] = field(default_factory=list)
    fixed_ms: float = math.nan           # a in step = a + b*C
    per_request_ms: float = math.nan     # b
    fallbacks: list[str] = field(default_factory=list)
    profile: str = ""                    # torch.profiler table at the largest C (--profile)


def bench_config(base: str, layers: str) -> ModelConfig:
    """A configuration with the chosen layer kinds (e.g. "swa,csa,hca,csa") and the widths of `base`."""
    kinds = [k.strip().lower() for k in layers.split(",") if k.strip()]
    bad = [k for k in kinds if k not in KIND_RATIO]
    if not kinds or bad:
        raise click.UsageError(f"--layers takes a comma list of swa, csa, hca; got {layers!r}")
    cfg = {"tiny": TINY, "flash": FLASH, "pro": PRO}[base]
    ratios = tuple(KIND_RATIO[k] if base != "tiny" or k != "hca" else 8 for k in kinds)
    return cfg.replace(name=f"{base}-{'-'.join(kinds)}", n_layers=len(kinds), compress_ratios=ratios,
                       n_mtp_layers=0, n_hash_layers=min(1, len(kinds)))


def fit_line(xs: list[float], ys: list[float]) -> tuple[float, float]:
    """Least squares y = a + b*x."""
    n = len(xs)
    if n < 2:
        return (ys[0] if ys else math.nan), math.nan
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx
    return my - b * mx, b


def _sync(dev: torch.device) -> None:
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


def _time_steps(run, positions: torch.Tensor, steps: int, dev: torch.device) -> list[float]:
    out = []
    for _ in range(steps):
        _sync(dev)
        t0 = time.perf_counter()
        run()
        _sync(dev)
        out.append(1e3 * (time.perf_counter() - t0))
        positions.add_(1)
    return out


def run_bench(tp: TPContext, cfg: ModelConfig, impl: str, device: str, batches: list[int], context: int,
              capacity: int, steps: int, warmup: int, graph: str, seed: int = 0,
              profile: bool = False) -> BenchResult:
    dev = torch.device(device)
    sd = checkpoint.random_local_state(cfg, tp.rank, tp.world, seed=seed, device=dev)
    model = Transformer(cfg, sd, Ops(impl), tp, dev)
    cache = model.new_cache(max(batches), capacity)
    cache.fill_random(torch.Generator(device=dev).manual_seed(seed))
    use_graph = dev.type == "cuda" and (graph == "on" or (graph == "auto" and impl != "reference"))
    res = BenchResult(cfg.name, impl, str(dev), tp.world, tp.simulate, context, capacity, use_graph)
    # with simulated TP, ids from this rank's vocab shard (the others would embed to zero rows)
    lo, hi = (0, cfg.vocab_size) if not tp.simulate else (tp.start(cfg.vocab_size), tp.start(cfg.vocab_size)
                                                          + tp.part(cfg.vocab_size))
    for c in batches:
        gen = torch.Generator().manual_seed(seed + c)                  # the same ids on every rank
        ids = torch.randint(lo, hi, (c,), generator=gen).to(dev)
        positions = torch.full((c,), context, dtype=torch.long, device=dev)
        seq_ids = torch.arange(c, device=dev)

        def eager():
            model.decode(ids, positions, seq_ids, cache, check=False)

        run = eager
        for _ in range(warmup):
            eager()
            positions.add_(1)
        if res.graph and graph == "auto" and model.ops.fallbacks and not res.graph_error:
            res.graph_error = (f"not attempted: reference fallbacks read tensors on the host "
                               f"({', '.join(sorted(model.ops.fallbacks))}); --graph on forces a try")
        if res.graph and not res.graph_error:
            try:
                g = torch.cuda.CUDAGraph()
                s = torch.cuda.Stream(dev)
                s.wait_stream(torch.cuda.current_stream(dev))
                with torch.cuda.stream(s):
                    eager()                                  # warm the side stream's allocator
                torch.cuda.current_stream(dev).wait_stream(s)
                with torch.cuda.graph(g):
                    eager()
                run = g.replay
            except Exception as e:  # noqa: BLE001 - reported, then timed eagerly
                res.graph_error = f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"
                _sync(dev)
        positions.fill_(context)
        times = _time_steps(run, positions, steps, dev)
        q = statistics.quantiles(times, n=10, method="inclusive") if len(times) >= 2 else [times[0]] * 9
        med = statistics.median(times)
        res.points.append(BenchPoint(c, med, q[0], q[-1], 1e3 * c / med))
        if profile and c == max(batches):
            res.profile = _profile(model, eager, positions, dev)
    res.fixed_ms, res.per_request_ms = fit_line([p.batch for p in res.points], [p.step_ms for p in res.points])
    res.fallbacks = sorted(model.ops.fallbacks) if impl != "reference" else []
    return res


class _LabelledOps:
    """Ops whose every call is a profiler range named after the op (for --profile)."""

    def __init__(self, ops: Ops):
        self._ops = ops

    def __getattr__(self, op: str):
        fn = getattr(self._ops, op)
        if not callable(fn):
            return fn

        def labelled(**kw):
            with torch.profiler.record_function(op):
                return fn(**kw)
        return labelled


def _profile(model: Transformer, run, positions: torch.Tensor, dev: torch.device, steps: int = 2) -> str:
    """Time per op of the contract over `steps` eager decode steps (torch.profiler ranges per op)."""
    from torch.profiler import ProfilerActivity, profile
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if dev.type == "cuda" else [])
    plain = model.env.ops
    model.env.ops = _LabelledOps(plain)
    try:
        with profile(activities=acts) as prof:
            for _ in range(steps):
                run()
                positions.add_(1)
            _sync(dev)
    finally:
        model.env.ops = plain
    from kernelbench import registry
    names = {o.name for o in registry.ops()}
    events = [e for e in prof.key_averages() if e.key in names]
    gpu = [getattr(e, "device_time_total", 0.0) or getattr(e, "cuda_time_total", 0.0) for e in events]
    use_gpu = dev.type == "cuda" and any(gpu)          # else host time (the ranges' wall time on the CPU)
    rows = [(g if use_gpu else e.cpu_time_total, e.key, e.count) for e, g in zip(events, gpu)]
    total = sum(r[0] for r in rows) or 1.0
    where = "GPU" if use_gpu else "host"
    lines = [f"{'op':<22}{'calls/step':>11}{where + ' ms/step':>14}{'share':>8}"]
    for t, name, n in sorted(rows, reverse=True):
        lines.append(f"{name:<22}{n / steps:>11.0f}{t / 1e3 / steps:>14.3f}{100 * t / total:>7.1f}%")
    return "\n".join(lines)


def report(res: BenchResult, console: Console) -> None:
    tp = f"TP{res.tp}" + (" (rank-0 shapes, collectives skipped)" if res.simulated_tp else "")
    table = Table(title=f"decode step: {res.config}, {res.impl}, {res.device}, {tp}, context {res.context}, "
                        f"capacity {res.capacity}, CUDA graph {'yes' if res.graph and not res.graph_error else 'no'}")
    for col in ("C", "step ms (median)", "p10", "p90", "tokens/s"):
        table.add_column(col, justify="right")
    for p in res.points:
        table.add_row(str(p.batch), f"{p.step_ms:.2f}", f"{p.p10_ms:.2f}", f"{p.p90_ms:.2f}", f"{p.tokens_per_s:.1f}")
    console.print(table)
    a, b = res.fixed_ms, res.per_request_ms
    if not math.isnan(b):
        console.print(f"fit: step = {a:.2f} ms + {b:.3f} ms x C  (users' anchor before the fix: 40 ms + 31 ms x N)")
        if b > 0:
            console.print(f"throughput ceiling from per-request cost: {1e3 / b:.3g} tokens/s")
        big = max(p.batch for p in res.points)
        if b > 0 and b * big > a:
            console.print(f"[yellow]per-request cost dominates at C={big} ({b * big:.1f} ms of {a + b * big:.1f} ms): "
                          f"look for work per sequence that batching does not share (or that is sized by capacity)[/]")
    if res.graph_error:
        console.print(f"[yellow]CUDA graph capture failed, timed eagerly:[/] {res.graph_error}")
    if res.fallbacks:
        console.print(f"[yellow]ops without a {res.impl} kernel ran their reference:[/] {', '.join(res.fallbacks)}")
    if res.profile:
        console.print(f"time per op at C={max(p.batch for p in res.points)} (eager, 2 steps):")
        console.print(res.profile, markup=False, highlight=False)


def _ints(text: str) -> list[int]:
    try:
        out = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise click.UsageError(f"expected a comma list of integers, got {text!r}") from None
    if not out or min(out) < 1:
        raise click.UsageError(f"expected positive integers, got {text!r}")
    return out


@click.command("decode-bench")
@click.option("--impl", default="reference", show_default=True, type=click.Choice(["reference", "triton"]))
@click.option("--device", default="cpu", show_default=True)
@click.option("--config", "base", default=None, type=click.Choice(["tiny", "flash", "pro"]),
              help="widths (default: tiny on a CPU, flash on a GPU)")
@click.option("--layers", default="swa,csa,hca,csa", show_default=True, help="layer kinds, in order")
@click.option("--tp", default=None, type=int, help="TP degree whose rank-0 shapes run (default: 1 on a CPU, "
              "8 on a GPU; under torchrun the real WORLD_SIZE)")
@click.option("--batches", default="1,16,64", show_default=True, help="concurrent requests C")
@click.option("--context", default=None, type=int, help="tokens already in every sequence (default 64 tiny, 512)")
@click.option("--capacity", default=None, type=int, help="cache capacity per sequence (default context + steps + 8)")
@click.option("--steps", default=None, type=int, help="timed steps per C (default 3 on a CPU, 20 on a GPU)")
@click.option("--warmup", default=None, type=int, help="untimed steps per C (default 1 on a CPU, 3 on a GPU)")
@click.option("--graph", default="auto", show_default=True, type=click.Choice(["auto", "on", "off"]),
              help="CUDA graph (auto: with --impl triton on a GPU)")
@click.option("--profile", is_flag=True, help="also print the ops that take the time at the largest C")
@click.option("--json", "json_path", default=None, type=click.Path(dir_okay=False), help="write the results here")
def command(impl, device, base, layers, tp, batches, context, capacity, steps, warmup, graph, profile, json_path):
    """Decode step time at C = 1, 16, 64 and its fit a + b*C."""
    if impl == "triton" and device == "cpu" and os.environ.get("TRITON_INTERPRET") != "1":
        raise click.UsageError("--impl triton on a CPU needs TRITON_INTERPRET=1 (the Triton interpreter)")
    gpu = device.startswith("cuda")
    if gpu and not torch.cuda.is_available():
        raise click.UsageError(f"--device {device}: no CUDA device here")
    base = base or ("flash" if gpu else "tiny")
    cfg = bench_config(base, layers)
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world > 1:                                      # torchrun: real collectives
        ctx = TPContext.from_env()
        if tp is not None and tp != ctx.world:
            raise click.UsageError(f"--tp {tp} but torchrun started WORLD_SIZE={ctx.world} processes")
        if gpu:
            device = f"cuda:{torch.cuda.current_device()}"
    else:
        tp = tp or (8 if gpu else 1)
        ctx = TPContext(rank=0, world=tp, simulate=tp > 1)
    try:
        cfg.check_tp(ctx.world)
    except ValueError as e:
        raise click.UsageError(str(e)) from None
    context = context or (64 if base == "tiny" else 512)
    steps = steps or (20 if gpu else 3)
    warmup = warmup if warmup is not None else (3 if gpu else 1)
    capacity = capacity or context + warmup + steps + 8
    if capacity < context + warmup + steps + 1:
        raise click.UsageError(f"--capacity {capacity} is below context + warmup + steps")
    res = run_bench(ctx, cfg, impl, device, _ints(batches), context, capacity, steps, warmup, graph,
                    profile=profile)
    if ctx.rank == 0:
        report(res, Console(width=160))
        if json_path:
            with open(json_path, "w") as f:
                json.dump(asdict(res), f, indent=1)
