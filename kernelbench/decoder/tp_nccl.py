"""Tensor-parallel runs with real collectives (issues 15 and 16): the work behind scripts/tp_nccl.py.

Started once per GPU by torchrun (NCCL; gloo on a CPU), every rank:
  1. checkpoint  rank 0 writes one random official-format checkpoint (the widths of --config, the few
                 layers of --check-layers, drawn on the GPU); every rank loads its TP shard of it;
  2. check       TP-N against TP1 on the same prompts (`probe`: each sublayer on identical inputs, then
                 two prompts prefilled and one ragged decode step), with the tolerances of the CPU TP test
                 (tests/test_model.py uses `compare` too); every rank must hold the same result;
  3. bench       decode_bench.run_bench at TP-N with the collectives inside the CUDA graph, then the same
                 model with the collectives switched off (`collectives_off`: the TP-N shapes decode-bench
                 simulates on one GPU); the difference is the collectives' cost on the step, and the
                 profiler's all_reduce / all_gather rows are their kernels' GPU time. --bench-layers other
                 than the check's (full depth for issue 16) are drawn in place on each GPU
                 (`generate_in_place`) and pass the loader's checks (`check_local_state`);
                 optionally the same config at TP1 on rank 0 (when it fits on one GPU);
  4. store       rank 0: bench rows (op decode_step) and a verify run (profile "tp") in the database;
                 tp_nccl.json and tp_nccl.md (this module's tables + the `kernelbench report` sections)
                 under --out.

NVLink multicast stays off (it can take a host's GPUs out of service): `enforce_safe_env` sets
NCCL_NVLS_ENABLE=0, TORCH_SYMM_MEM_DISABLE_MULTICAST=1, NVSHMEM_DISABLE_NVLS=1 in this process (its
children inherit them) and refuses to start when one is set to anything else. No symmetric memory is used.

Under torchrun a process group exists even at one process: `RunContext(always=True)` then runs the
collectives through NCCL at world 1 as well (the one-GPU dry run of the whole path; the MoE's own
all-reduce only exists at world > 1).
"""
from __future__ import annotations

import argparse
import dataclasses
import datetime as _dt
import json
import math
import os
import shutil
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import torch
import torch.distributed as dist

from kernelbench.decoder import checkpoint
from kernelbench.decoder import decode_bench as db
from kernelbench.decoder.backend import Ops
from kernelbench.decoder.checkpoint import CheckpointError
from kernelbench.config import ModelConfig
from kernelbench.decoder.model import Step, Transformer, sublayer_value
from kernelbench.decoder.tp import COLLECTIVES, TPContext

SAFE_ENV = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}

# Tolerances of the TP check (relative L2 error per row, TP-N against TP1). Sublayers on identical inputs:
# attention differs by the bf16 rounding of the wo_b partial sums; the reference MoE is exact up to fp32
# order unless the shared expert is split over the ranks (kernelbench/decoder/model.py shared_split: each rank's
# slice rounded to bf16, the CPU test measured 2e-3..3e-3 at TP4); with kernels TP1 runs the fused moe_layer and
# TP-N moe_routed (bf16 rounding apart), so the attention bound applies to those. Whole model: routing flips amplify
# those differences (SPEC 6); a wrong shard or collective gives median errors ~1.4 and argmax agreement ~0.
TOL_ATTN = 0.01
TOL_MOE_REFERENCE = 1e-5
TOL_LOGITS_MEDIAN = 0.3
MIN_ARGMAX_AGREEMENT = 0.5


class TPRunError(ValueError):
    """A usage error: one line for the user."""


def enforce_safe_env(environ=None) -> dict[str, str]:
    """Set the three multicast-off variables (SAFE_ENV) in `environ` (default os.environ, inherited by
    every process started from here); TPRunError if one is already set to another value."""
    environ = os.environ if environ is None else environ
    bad = [f"{k}={environ[k]}" for k, v in SAFE_ENV.items() if k in environ and environ[k] != v]
    if bad:
        need = ", ".join(f"{k}={v}" for k, v in SAFE_ENV.items())
        raise TPRunError(f"NVLink multicast must stay off: found {', '.join(bad)}; unset it or set {need}")
    for k, v in SAFE_ENV.items():
        environ[k] = v
    return {k: environ[k] for k in SAFE_ENV}


@dataclass
class RunContext(TPContext):
    """A TPContext whose collectives also run at world 1 when `always` (a process group exists)."""
    always: bool = False

    @property
    def active(self) -> bool:
        return (self.world > 1 or self.always) and not self.simulate


def launch_world() -> tuple[int, int, int]:
    """(rank, world, local rank) of a torchrun launch; (0, 1, 0) without one."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    return rank, world, int(os.environ.get("LOCAL_RANK", str(rank)))


def init_context(device: str) -> tuple[RunContext, torch.device]:
    """The rank's context and device. Under torchrun (MASTER_ADDR set) a process group is created
    (nccl on cuda, gloo on cpu) even at world 1, and the collectives run through it."""
    rank, world, local = launch_world()
    if device.startswith("cuda"):
        if not torch.cuda.is_available():
            raise TPRunError(f"--device {device}: no CUDA device here")
        if local >= torch.cuda.device_count():
            raise TPRunError(f"LOCAL_RANK {local} but only {torch.cuda.device_count()} GPUs are visible")
        dev = torch.device("cuda", local)
        torch.cuda.set_device(dev)
    elif device == "cpu":
        dev = torch.device("cpu")
    else:
        raise TPRunError(f"--device takes cpu or cuda, got {device!r}")
    if "MASTER_ADDR" not in os.environ:
        if world > 1:
            raise TPRunError(f"WORLD_SIZE={world} without MASTER_ADDR: start the script with torchrun")
        return RunContext(), dev
    if not dist.is_initialized():
        if dev.type == "cuda":
            dist.init_process_group("nccl", device_id=dev)
        else:
            dist.init_process_group("gloo")
    return RunContext(rank=rank, world=world, always=True), dev


@contextmanager
def collectives_off(model: Transformer):
    """The model with its collectives skipped (the same per-rank shapes; decode-bench's simulated TP):
    yields the context to give run_bench."""
    real = model.tp
    off = dataclasses.replace(real, simulate=True)
    model.tp = model.env.tp = off
    try:
        yield off
    finally:
        model.tp = model.env.tp = real


# ------------------------------------------------------------------------------------------------
# weights: the loader's checks for weights drawn in place
# ------------------------------------------------------------------------------------------------
def check_local_state(cfg: ModelConfig, sd: dict[str, torch.Tensor], rank: int, world: int,
                      shard_indexer: bool = False) -> None:
    """What checkpoint.load checks, for a rank-local state that never went through a file: every tensor
    of rank `rank` of TP`world` present, nothing else, each with the loader's dtype and local shape.
    CheckpointError naming the tensor otherwise."""
    specs = {n: s for n, s in checkpoint.param_specs(cfg).items() if checkpoint.is_local(s, cfg, rank, world)}
    missing = [n for n in specs if n not in sd]
    if missing:
        s = specs[missing[0]]
        raise CheckpointError(f"tensor {missing[0]} is missing from rank {rank}'s state ({len(missing)} missing; "
                              f"config {cfg.name!r} expects shape {s.shape} {s.dtype})")
    extra = [n for n in sd if n not in specs]
    if extra:
        raise CheckpointError(f"tensor {extra[0]} does not belong to rank {rank} of TP{world} of {cfg.name!r} "
                              f"({len(extra)} such tensors)")
    for name, spec in specs.items():
        t, shape = sd[name], checkpoint.local_shape(name, spec, world, shard_indexer)
        if t.dtype != spec.dtype:
            raise CheckpointError(f"tensor {name} has dtype {t.dtype}, expected {spec.dtype}")
        if tuple(t.shape) != shape:
            raise CheckpointError(f"tensor {name} has shape {tuple(t.shape)}, rank {rank} of TP{world} expects {shape}")


def generate_in_place(cfg: ModelConfig, ctx: TPContext, seed: int, device) -> dict[str, torch.Tensor]:
    """This rank's random shard drawn on `device` (no file), checked as the loader checks a file."""
    sd = checkpoint.random_local_state(cfg, ctx.rank, ctx.world, seed=seed, device=device)
    check_local_state(cfg, sd, ctx.rank, ctx.world)
    return sd


def ensure_checkpoint(path: Path, cfg: ModelConfig, seed: int, device) -> bool:
    """Write the random checkpoint of cfg at path unless one of that config is there -> written?"""
    try:
        if (path / checkpoint.INDEX_FILE).exists() and ModelConfig.load(path) == cfg:
            return False
    except (OSError, ValueError, TypeError):
        pass
    if path.exists():
        shutil.rmtree(path)
    checkpoint.write_random(path, cfg, seed=seed, device=device)
    return True


# ------------------------------------------------------------------------------------------------
# the TP check
# ------------------------------------------------------------------------------------------------
def probe(model: Transformer, n_tok: int = 20, seed: int = 0) -> dict[str, torch.Tensor]:
    """Each block's attention and MoE on identical random inputs (prefill of n_tok tokens), then
    whole-model logits: two prompts (n_tok and n_tok - 5 tokens) prefilled and one ragged decode step.
    -> {attnI, moeI, logits} as fp32 CPU tensors."""
    dev = model.embed.device
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(n_tok, model.cfg.dim, generator=gen).to(torch.bfloat16).to(dev)
    ids = torch.randint(2, model.cfg.vocab_size, (n_tok,), generator=gen).to(dev)
    cache = model.new_cache(2, n_tok + 4)
    step = Step(ids, torch.arange(n_tok, device=dev), torch.zeros(n_tok, dtype=torch.long, device=dev), prefill=True)
    out = {}
    with torch.inference_mode():
        for i, blk in enumerate(model.layers):
            out[f"attn{i}"] = sublayer_value(blk.attn(model.env, x, step, cache.layers[i]))
            out[f"moe{i}"] = sublayer_value(blk.ffn(model.env, x, ids))
    logits = [model.prefill(ids, 0, cache)[0], model.prefill(ids[:n_tok - 5], 1, cache)[0]]
    nxt = torch.tensor([3, 5], device=dev)
    pos = torch.tensor([n_tok, n_tok - 5], device=dev)
    logits.append(model.decode(nxt, pos, torch.tensor([0, 1], device=dev), cache)[0])
    out["logits"] = torch.cat(logits)
    return {k: v.float().cpu() for k, v in out.items()}


def rel(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Per-row relative L2 error of a against b."""
    return (a.float() - b.float()).norm(dim=-1) / b.float().norm(dim=-1)


@dataclass
class Agreement:
    """TP-N against TP1: each sublayer's error (relative L2 over the flattened output) and tolerance,
    the logits' per-row median / max error and argmax agreement, and the verdict."""
    world: int
    impl: str
    sublayers: dict[str, float] = field(default_factory=dict)
    tolerances: dict[str, float] = field(default_factory=dict)
    logits_median: float = math.nan
    logits_max: float = math.nan
    argmax_agreement: float = math.nan
    ranks_identical: bool = True
    failures: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return not self.failures


def compare(got: dict[str, torch.Tensor], ref: dict[str, torch.Tensor], world: int, impl: str = "reference",
            ranks_identical: bool = True, split_shared: bool = False) -> Agreement:
    """The TP check's verdict on probe outputs (tests/test_model.py asserts the same bounds); `split_shared`: the
    TP-N model split the shared expert over its ranks (Env.shared_split)."""
    a = Agreement(world, impl, ranks_identical=ranks_identical)
    if not ranks_identical:
        a.failures.append("the ranks returned different results")
    for k in ref:
        if k not in got or got[k].shape != ref[k].shape:
            a.failures.append(f"{k}: shape {tuple(got[k].shape) if k in got else 'missing'}, TP1 {tuple(ref[k].shape)}")
            continue
        if k == "logits":
            continue
        tol = TOL_ATTN if k.startswith("attn") or impl != "reference" or split_shared else TOL_MOE_REFERENCE
        err = rel(got[k].flatten(), ref[k].flatten()).item()
        a.sublayers[k], a.tolerances[k] = err, tol
        if not err < tol:
            a.failures.append(f"{k}: relative error {err:.3g} >= {tol:g}")
    if any(f.startswith("logits:") for f in a.failures):
        return a
    err = rel(got["logits"], ref["logits"])
    a.logits_median, a.logits_max = err.median().item(), err.max().item()
    a.argmax_agreement = (got["logits"].argmax(-1) == ref["logits"].argmax(-1)).float().mean().item()
    if not a.logits_median < TOL_LOGITS_MEDIAN:
        a.failures.append(f"logits: median relative error {a.logits_median:.3g} >= {TOL_LOGITS_MEDIAN}")
    if not a.argmax_agreement > MIN_ARGMAX_AGREEMENT:
        a.failures.append(f"logits: argmax agreement {a.argmax_agreement:.2f} <= {MIN_ARGMAX_AGREEMENT}")
    return a


def ranks_agree(ctx: TPContext, out: dict[str, torch.Tensor], device) -> bool:
    """Every rank holds the same probe outputs (compared by two float64 digests per output)."""
    if not ctx.active or ctx.world == 1:
        return True
    digest = torch.tensor([[v.double().sum().item(), v.double().abs().sum().item()] for v in out.values()],
                          dtype=torch.float64, device=device).flatten()
    every = ctx.all_gather(digest[None], dim=0)
    return bool((every == every[:1]).all())


# ------------------------------------------------------------------------------------------------
# collectives per step
# ------------------------------------------------------------------------------------------------
def collective_rows(real: db.BenchResult, off: db.BenchResult | None) -> list[dict]:
    """Per point: the step with collectives, without them (the same graph otherwise), the difference and
    its share, and the GPU time of the collectives' kernels (profiler rows all_reduce / all_gather)."""
    off_by = {p.batch: p for p in off.points} if off is not None else {}
    rows = []
    for p in real.points:
        q = off_by.get(p.batch)
        att = {a["op"]: a for a in p.attribution}
        kern = sum(att[c]["gpu_ms"] for c in COLLECTIVES if c in att) if p.attribution else math.nan
        calls = sum(att[c]["calls"] for c in COLLECTIVES if c in att) if p.attribution else math.nan
        off_ms = q.step_ms if q is not None else math.nan
        rows.append({"C": p.batch, "context": p.context, "step_ms": p.step_ms, "no_collectives_ms": off_ms,
                     "collectives_ms": p.step_ms - off_ms, "collective_share": (p.step_ms - off_ms) / p.step_ms,
                     "collective_kernel_ms": kern, "collective_kernel_share": kern / p.step_ms,
                     "collective_calls": calls, "tokens_per_s": p.tokens_per_s,
                     "no_collectives_tokens_per_s": q.tokens_per_s if q is not None else math.nan})
    return rows


# ------------------------------------------------------------------------------------------------
# the plan (every argument checked before a process group exists)
# ------------------------------------------------------------------------------------------------
@dataclass
class Plan:
    base: str
    check_cfg: ModelConfig
    bench_cfg: ModelConfig
    in_place: bool
    impl: str
    check_impl: str
    batches: list[int]
    contexts: list[db.ContextSpec]
    steps: int
    warmup: int
    graph: str
    profile: bool
    tp1: bool
    check: bool
    n_tok: int
    seed: int
    checkpoint: Path
    out: Path
    db_url: str | None
    store: bool
    world: int


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="tp_nccl.py", description="TP-N decoder with real collectives (torchrun): "
                                "TP-N vs TP1 logits, decode bench with and without collectives, database, report.")
    p.add_argument("--device", default=None, help="cuda (default when a GPU is visible) or cpu (gloo)")
    p.add_argument("--config", default="flash", choices=["flash", "pro", "tiny"], help="widths")
    p.add_argument("--check-layers", default="short", help="layers of the checkpoint the TP check loads "
                   "(decode_bench --layers syntax: short = swa,csa,hca,csa)")
    p.add_argument("--bench-layers", default=None, help="layers of the benchmarked model (default: the checkpoint's); "
                   "other layers (e.g. flash = full depth) are drawn in place on each GPU")
    p.add_argument("--mtp", action="store_true", help="the benchmarked model runs its MTP draft layer every step")
    p.add_argument("--impl", default=None, help="bench implementation (default triton on cuda, reference on cpu)")
    p.add_argument("--check-impl", default="reference", help="implementation of the TP check (default reference, "
                   "as the CPU test)")
    p.add_argument("--batches", default="1,16,64", help="concurrent requests C")
    p.add_argument("--context", default="512", help="context of every sequence (decode_bench --context syntax)")
    p.add_argument("--ragged", default="", help="also sweep C at this ragged context mix, e.g. 256:16384 "
                   "(log-uniform per sequence) or @FILE")
    p.add_argument("--steps", type=int, default=None, help="timed steps per point (default 20 cuda, 2 cpu)")
    p.add_argument("--warmup", type=int, default=None, help="untimed steps per point (default 3 cuda, 0 cpu)")
    p.add_argument("--graph", default="auto", choices=["auto", "on", "off"])
    p.add_argument("--no-profile", action="store_true", help="no per-op attribution (no collective kernel rows)")
    p.add_argument("--tp1", default="auto", choices=["auto", "on", "off"],
                   help="also bench the same model at TP1 on rank 0 (auto: when it is the checkpoint's model)")
    p.add_argument("--no-check", action="store_true", help="skip the TP-N vs TP1 check")
    p.add_argument("--tokens", type=int, default=20, help="prompt tokens of the TP check")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--checkpoint", default=None, help="checkpoint directory (written when missing or of another "
                   "config; default /tmp/kb-tp-ckpt-CONFIG-LAYERS)")
    p.add_argument("--out", default=None, help="results directory (default $OUT, else ./tp_nccl_out)")
    p.add_argument("--db", dest="db_url", default=None, help="database URL (default $KERNELBENCH_DB)")
    p.add_argument("--no-store", action="store_true")
    return p


def _ints(text: str) -> list[int]:
    try:
        out = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise TPRunError(f"--batches takes a comma list of integers, got {text!r}") from None
    if not out or min(out) < 1:
        raise TPRunError(f"--batches takes positive integers, got {text!r}")
    return out


def make_plan(args: argparse.Namespace, world: int, cuda: bool) -> Plan:
    """Every argument checked (TPRunError / BenchError, one line) before anything starts."""
    from kernelbench import registry
    impl = args.impl or ("triton" if cuda else "reference")
    for what, name in (("--impl", impl), ("--check-impl", args.check_impl)):
        if not any(name in registry.impls(o.name) for o in registry.ops()):
            raise TPRunError(f"{what} {name}: no op has an implementation of that name")
    if impl == "triton" and not cuda and os.environ.get("TRITON_INTERPRET") != "1":
        raise TPRunError("--impl triton on a CPU needs TRITON_INTERPRET=1")
    check_cfg = db.bench_config(args.config, args.check_layers)
    bench_cfg = db.bench_config(args.config, args.bench_layers or args.check_layers, args.mtp)
    for cfg in (check_cfg, bench_cfg):
        try:
            cfg.check_tp(world)
        except ValueError as e:
            raise TPRunError(f"TP{world}: {e}") from None
    if args.tokens < 6:
        raise TPRunError(f"--tokens must be >= 6 (the second prompt is 5 tokens shorter), got {args.tokens}")
    contexts = [db.parse_context(args.context)] + ([db.parse_context(args.ragged)] if args.ragged else [])
    steps = args.steps if args.steps is not None else (20 if cuda else 2)
    warmup = args.warmup if args.warmup is not None else (3 if cuda else 0)
    if steps < 1 or warmup < 0:
        raise TPRunError(f"--steps must be >= 1 and --warmup >= 0, got {steps}, {warmup}")
    in_place = bench_cfg != check_cfg
    tp1 = args.tp1 == "on" or (args.tp1 == "auto" and not in_place)
    ckpt = Path(args.checkpoint or f"/tmp/kb-tp-ckpt-{check_cfg.name}")
    out = Path(args.out or os.environ.get("OUT") or "tp_nccl_out")
    return Plan(args.config, check_cfg, bench_cfg, in_place, impl, args.check_impl, _ints(args.batches), contexts,
                steps, warmup, args.graph, not args.no_profile, tp1, not args.no_check, args.tokens, args.seed, ckpt,
                out, args.db_url, not args.no_store, world)


# ------------------------------------------------------------------------------------------------
# the run
# ------------------------------------------------------------------------------------------------
class Log:
    """Rank 0's progress lines with the seconds since start, and the results JSON rewritten after each
    stage (a run cut short keeps what it finished)."""

    def __init__(self, rank: int, out: Path):
        self.rank, self.out, self.t0 = rank, out, time.monotonic()
        self.results: dict = {}

    def __call__(self, msg: str) -> None:
        if self.rank == 0:
            print(f"[tp_nccl {time.monotonic() - self.t0:7.1f}s] {msg}", flush=True)

    def save(self, **items) -> None:
        self.results.update(items)
        if self.rank == 0:
            self.out.mkdir(parents=True, exist_ok=True)
            (self.out / "tp_nccl.json").write_text(json.dumps(_jsonable(self.results), indent=1))


def _jsonable(v):
    if dataclasses.is_dataclass(v) and not isinstance(v, type):
        d = {f.name: _jsonable(getattr(v, f.name)) for f in dataclasses.fields(v)}
        if isinstance(v, Agreement):
            d["passed"] = v.passed
        return d
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, Path):
        return str(v)
    return v


def _free(dev: torch.device) -> None:
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)
        torch.cuda.empty_cache()


def run_check(plan: Plan, ctx: RunContext, dev: torch.device, log: Log) -> Agreement:
    model = Transformer.from_checkpoint(plan.checkpoint, ops=Ops(plan.check_impl), tp=ctx, device=dev)
    got = probe(model, plan.n_tok, plan.seed)
    same = ranks_agree(ctx, got, dev)
    split = model.env.shared_split                                      # the probe's sublayers ran the slices
    del model
    _free(dev)
    log(f"check: TP{ctx.world} probe done (ranks identical: {same}); TP1 reference on rank 0")
    agreement = None
    if ctx.rank == 0:
        ref_model = Transformer.from_checkpoint(plan.checkpoint, ops=Ops(plan.check_impl), tp=TPContext(), device=dev)
        ref = probe(ref_model, plan.n_tok, plan.seed)
        del ref_model
        _free(dev)
        agreement = compare(got, ref, ctx.world, plan.check_impl, same, split)
    ctx.barrier()
    return agreement


def bench_model(plan: Plan, ctx: TPContext, dev: torch.device) -> Transformer:
    ops = Ops(plan.impl)
    if not plan.in_place:
        return Transformer.from_checkpoint(plan.checkpoint, ops=ops, tp=ctx, device=dev)
    sd = generate_in_place(plan.bench_cfg, ctx, plan.seed, dev)
    model = Transformer(plan.bench_cfg, sd, ops, ctx, dev)
    del sd
    return model


def run_benches(plan: Plan, ctx: RunContext, dev: torch.device, gbps, log: Log) -> dict[str, list]:
    """-> {"real": [...], "off": [...], "tp1": [...]}: one BenchResult per context of the plan. Every step is timed
    before any profile runs in the process (a torch.profiler run slows the graph replays timed after it:
    decode_bench.attribute_points), so with plan.profile the attribution is a last pass per model: TP1's right
    after its timing (the last timing in the process), then the TP model's, rebuilt for it."""
    out: dict[str, list] = {"real": [], "off": [], "tp1": []}
    model = bench_model(plan, ctx, dev)
    how = "drawn in place" if plan.in_place else "loaded"
    log(f"bench: TP{ctx.world} model of {plan.bench_cfg.name} ready ({how})")
    kw = dict(steps=plan.steps, warmup=plan.warmup, graph=plan.graph, seed=plan.seed)
    for spec in plan.contexts:
        res = db.run_bench(ctx, plan.bench_cfg, plan.impl, str(dev), plan.batches, spec, model=model, gbps=gbps, **kw)
        out["real"].append(res)
        log(f"bench: TP{ctx.world} with collectives, context {spec.text}: "
            + ", ".join(f"C={p.batch} {p.step_ms:.3f} ms" for p in res.points)
            + (f" (graph error: {res.graph_error})" if res.graph_error else ""))
        if ctx.active:
            with collectives_off(model) as off:
                res = db.run_bench(off, plan.bench_cfg, plan.impl, str(dev), plan.batches, spec, model=model,
                                   gbps=gbps, **kw)
            out["off"].append(res)
            log(f"bench: TP{ctx.world} collectives off, context {spec.text}: "
                + ", ".join(f"C={p.batch} {p.step_ms:.3f} ms" for p in res.points))
        ctx.barrier()
    del model
    _free(dev)
    if plan.tp1 and ctx.world > 1:
        if ctx.rank == 0:
            tp1 = TPContext()
            model = bench_model(plan, tp1, dev)
            for spec in plan.contexts:
                out["tp1"].append(db.run_bench(tp1, plan.bench_cfg, plan.impl, str(dev), plan.batches, spec,
                                               model=model, gbps=gbps, **kw))
                log(f"bench: TP1 on rank 0, context {spec.text}: "
                    + ", ".join(f"C={p.batch} {p.step_ms:.3f} ms" for p in out["tp1"][-1].points))
            if plan.profile:
                for spec, res in zip(plan.contexts, out["tp1"]):
                    db.attribute_points(res, model, tp1, plan.batches, spec, **kw)
            del model
            _free(dev)
        ctx.barrier()
    if plan.profile:
        model = bench_model(plan, ctx, dev)
        for spec, res in zip(plan.contexts, out["real"]):
            db.attribute_points(res, model, ctx, plan.batches, spec, **kw)
            log(f"bench: TP{ctx.world} attribution, context {spec.text}")
        ctx.barrier()
        del model
        _free(dev)
    return out


def _open_store(plan: Plan):
    if not plan.store:
        return None
    from kernelbench.db.store import Store
    return Store(plan.db_url)


def store_all(plan: Plan, dev: torch.device, agreement: Agreement | None, benches: dict, stamp: str) -> dict:
    """Rank 0: bench rows under run tags tpN:STAMP, tpN-nocoll:STAMP, tp1:STAMP (":ctxI" for the second
    and later contexts), the check as a verify run of profile "tp". -> {what: tag or run id}."""
    from kernelbench.db.store import Store
    from kernelbench.harness.fingerprint import fingerprint, git_commit
    store = Store(plan.db_url)
    git = git_commit()
    env_id = store.environment_id(fingerprint(str(dev)))
    tags: dict = {}
    names = {"real": f"tp{plan.world}", "off": f"tp{plan.world}-nocoll", "tp1": "tp1"}
    for kind, results in benches.items():
        for i, res in enumerate(results):
            tag = f"{names[kind]}:{stamp}" + (f":ctx{i}" if i else "")
            db.store_result(store, env_id, res, tag, git)
            tags[f"{kind}{i}"] = tag
    if agreement is not None:
        run = store.start_verify_run(env_id, profile="tp", device=dev.type, shape_set=plan.check_cfg.name,
                                     command=" ".join(sys.argv), git_commit=git)
        impl_id = store.op_impl_id("tp.agreement", f"{agreement.impl}@tp{agreement.world}", (git or "unknown")[:16],
                                   family="model", backend="model")
        for k, err in agreement.sublayers.items():
            tol = agreement.tolerances[k]
            store.add_verify_result(run, impl_id, params={"config": plan.check_cfg.name, "tp": agreement.world,
                                                          "output": k}, value_mode="random", seed=plan.seed,
                                    source="tp_nccl", passed=err < tol, stats={"rel_err": err, "tol": tol})
        ok = agreement.logits_median < TOL_LOGITS_MEDIAN and agreement.argmax_agreement > MIN_ARGMAX_AGREEMENT
        store.add_verify_result(run, impl_id, params={"config": plan.check_cfg.name, "tp": agreement.world,
                                                      "output": "logits"}, value_mode="random", seed=plan.seed,
                                source="tp_nccl", passed=ok and agreement.ranks_identical,
                                stats=_jsonable({"median_rel_err": agreement.logits_median,
                                                 "max_rel_err": agreement.logits_max,
                                                 "argmax_agreement": agreement.argmax_agreement,
                                                 "ranks_identical": agreement.ranks_identical}),
                                failure="; ".join(agreement.failures))
        store.finish_verify_run(run, "passed" if agreement.passed else "failed")
        tags["verify_run"] = run
    store.dispose()
    return tags


def report_sections(plan: Plan, dev: torch.device, agreement: Agreement | None, benches: dict) -> list:
    """This run's tables as report.Section objects (the page's head; kernelbench report's sections follow)."""
    from kernelbench.harness.report import Section
    sec = Section(f"TP{plan.world} with real collectives")
    sec.text.append(f"device {torch.cuda.get_device_name(dev) if dev.type == 'cuda' else 'cpu'} x {plan.world}, "
                    f"bench {plan.bench_cfg.name} ({plan.bench_cfg.n_layers + plan.bench_cfg.n_mtp_layers} layers, "
                    f"{'drawn in place' if plan.in_place else 'loaded from the checkpoint'}), impl {plan.impl}; "
                    f"multicast off: {', '.join(f'{k}={os.environ.get(k)}' for k in SAFE_ENV)}")
    if agreement is not None:
        a = agreement
        sec.text.append(f"TP{a.world} vs TP1 ({plan.check_cfg.name}, {a.impl} ops): "
                        f"{'PASS' if a.passed else 'FAIL: ' + '; '.join(a.failures)}; logits median rel. err "
                        f"{a.logits_median:.3g} (< {TOL_LOGITS_MEDIAN}), max {a.logits_max:.3g}, argmax agreement "
                        f"{a.argmax_agreement:.2f} (> {MIN_ARGMAX_AGREEMENT}), ranks identical {a.ranks_identical}")
        sec.tables.append((["output", "rel. err", "tolerance"],
                           [[k, f"{v:.3g}", f"{a.tolerances[k]:g}"] for k, v in a.sublayers.items()]))
    tp1 = {i: r for i, r in enumerate(benches.get("tp1", []))}
    for i, res in enumerate(benches.get("real", [])):
        off = benches["off"][i] if i < len(benches.get("off", [])) else None
        one = {p.batch: p for p in tp1[i].points} if i in tp1 else {}
        body = []
        for r in collective_rows(res, off):
            p1 = one.get(r["C"])
            body.append([str(r["C"]), f"{r['context']:.0f}", f"{r['step_ms']:.3f}", f"{r['no_collectives_ms']:.3f}",
                         f"{r['collectives_ms']:.3f} ({100 * r['collective_share']:.0f}%)",
                         f"{r['collective_kernel_ms']:.3f} ({100 * r['collective_kernel_share']:.0f}%)",
                         f"{r['collective_calls']:g}", f"{r['tokens_per_s']:.1f}",
                         f"{p1.step_ms:.3f}" if p1 else "", f"{p1.tokens_per_s:.1f}" if p1 else ""])
        sec.text.append(f"context {res.context}: CUDA graph {'yes' if res.graph and not res.graph_error else 'no'}"
                        + (f" ({res.graph_error})" if res.graph_error else "")
                        + (f"; fit step = {res.fixed_ms:.3f} ms + {res.per_request_ms:.4f} ms x C (r2 {res.fit_r2:.3f})"
                           if not math.isnan(res.per_request_ms) else ""))
        sec.tables.append((["C", "mean ctx", "step ms", "no-collective ms", "collectives ms (share)",
                            "collective kernels ms (share)", "collective calls", "tokens/s", "TP1 step ms",
                            "TP1 tokens/s"], body))
    return [sec]


def write_report(plan: Plan, dev: torch.device, agreement, benches: dict, tags: dict) -> Path:
    from kernelbench.harness import report
    sections = report_sections(plan, dev, agreement, benches)
    if plan.store and tags.get("real0"):
        from kernelbench.db.store import Store
        store = Store(plan.db_url)
        try:
            sections += report.build(store, run_tag=tags["real0"], plots=True)
        finally:
            store.dispose()
    path = plan.out / "tp_nccl.md"
    path.write_text(report.render_markdown(sections, plan.out, title=f"TP{plan.world} decoder with real collectives"))
    return path


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        env = enforce_safe_env()
        rank, world, _ = launch_world()
        device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
        plan = make_plan(args, world, device.startswith("cuda"))
        ctx, dev = init_context(device)
    except (TPRunError, db.BenchError) as e:
        print(f"tp_nccl.py: error: {e}", file=sys.stderr)
        return 2
    log = Log(ctx.rank, plan.out)
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    group = f"process group {dist.get_backend()}" if dist.is_initialized() else "no process group"
    log(f"TP{ctx.world} on {dev.type} ({group}), "
        f"{', '.join(f'{k}={v}' for k, v in env.items())}")
    log.save(world=ctx.world, device=str(dev), env=env, plan=plan, stamp=stamp, stages={})
    try:
        agreement = None
        if plan.check:
            if ctx.rank == 0:
                wrote = ensure_checkpoint(plan.checkpoint, plan.check_cfg, plan.seed, dev)
                log(f"checkpoint {plan.checkpoint} ({plan.check_cfg.name}): {'written' if wrote else 'reused'}")
            ctx.barrier()
            agreement = run_check(plan, ctx, dev, log)
            if ctx.rank == 0:
                log(f"check: {'PASS' if agreement.passed else 'FAIL'} " + "; ".join(agreement.failures)
                    + f" (logits median {agreement.logits_median:.3g}, argmax {agreement.argmax_agreement:.2f})")
            log.save(agreement=agreement)
        elif not plan.in_place and ctx.rank == 0:
            ensure_checkpoint(plan.checkpoint, plan.check_cfg, plan.seed, dev)
        if not plan.in_place:
            ctx.barrier()
        from kernelbench.decoder.decode_bench import ceiling_gbps
        store = _open_store(plan) if ctx.rank == 0 else None
        gbps = ceiling_gbps(str(dev), store)          # copy bandwidth (roofline): calibrated, else datasheet
        if store is not None:
            store.dispose()
        benches = run_benches(plan, ctx, dev, gbps, log)
        coll = {f"ctx{i}": collective_rows(r, benches["off"][i] if i < len(benches["off"]) else None)
                for i, r in enumerate(benches["real"])}
        log.save(bench=benches, collectives=coll)
        if ctx.rank == 0:
            from rich.console import Console
            console = Console(width=180)
            for kind in ("real", "off", "tp1"):
                for res in benches[kind]:
                    db.print_result(res, console)
            tags = store_all(plan, dev, agreement, benches, stamp) if plan.store else {}
            log.save(db_tags=tags)
            path = write_report(plan, dev, agreement, benches, tags)
            log(f"report {path}; results {plan.out / 'tp_nccl.json'}; database tags {tags}")
        failed = agreement is not None and ctx.rank == 0 and not agreement.passed
        return 1 if failed else 0
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()
