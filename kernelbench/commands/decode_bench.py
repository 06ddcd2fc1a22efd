"""`kernelbench decode-bench`: decode step time against the number of concurrent requests C and
against context, fitted as step = a + b*C (per-request cost that batching does not amortize shows
up: the users measured 40 ms + 31 ms x N on 8 GPUs; CONTEXT.md). The work is in
kernelbench/decoder/decode_bench.py; this is the command line.

    kernelbench decode-bench                                 # tiny model, 4 layers, CPU, reference ops
    kernelbench decode-bench --device cuda --impl triton     # all 43 Flash layers, TP8 rank-0 shapes on
                                                             # one GPU, CUDA graph
    kernelbench decode-bench --device cuda --impl triton --layers short --batches 1,2,4,8,16,32,64,128 \\
        --context 512:65536 --contexts 512,8192,65536 --profile --json decode.json
    kernelbench decode-bench --device cuda --impl triton --module my_kernels.py --use moe_experts=mine
    torchrun --nproc-per-node 8 -m kernelbench decode-bench --device cuda --impl triton   # real TP8

Results go to the database (op "decode_step") for `kernelbench report`, unless --no-store.
"""
from __future__ import annotations

import datetime as _dt
import json
import os
import sys
from pathlib import Path

import click
import torch
from rich.console import Console

from kernelbench.decoder import decode_bench as db
from kernelbench.decoder.lanes import parse_sites
from kernelbench.decoder.tp import TPContext


def _ints(text: str) -> list[int]:
    try:
        out = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise click.UsageError(f"expected a comma list of integers, got {text!r}") from None
    if not out or min(out) < 1:
        raise click.UsageError(f"expected positive integers, got {text!r}")
    return out


@click.command("decode-bench")
@click.option("--impl", default="reference", show_default=True,
              help="implementation of every op (reference, triton, or a --module's); ops without it run the reference")
@click.option("--device", default="cpu", show_default=True)
@click.option("--config", "base", default=None, type=click.Choice(["tiny", "flash", "pro"]),
              help="widths (default: the --layers config, else tiny on a CPU and flash on a GPU)")
@click.option("--layers", default=None,
              help="flash / pro / tiny (that config's own layer list), short (swa,csa,hca,csa) or a comma list of "
                   "swa, csa, hca  [default: the config's own list on a GPU, short on a CPU]")
@click.option("--mtp", is_flag=True, help="also run the config's MTP layer in every step")
@click.option("--tp", default=None, type=click.IntRange(min=1), help="TP degree whose rank-0 shapes run "
              "(default: 1 on a CPU, 8 on a GPU; under torchrun the real WORLD_SIZE)")
@click.option("--batches", default="1,16,64", show_default=True, help="concurrent requests C")
@click.option("--context", "context_text", default=None,
              help="tokens in each sequence: N, LO:HI (log-uniform per sequence, seeded) or @FILE of lengths "
                   "[default: 64 tiny, 512]")
@click.option("--contexts", default=None, help="also sweep these contexts (comma list of N or LO:HI) at the smallest C")
@click.option("--capacity", default=None, type=click.IntRange(min=1),
              help="cache capacity per sequence (default longest context + steps + 16)")
@click.option("--steps", default=None, type=click.IntRange(min=1), help="timed steps per point (default 3 CPU, 20 GPU)")
@click.option("--warmup", default=None, type=click.IntRange(min=0),
              help="untimed steps per point (default 1 CPU, 3 GPU)")
@click.option("--graph", default="auto", show_default=True, type=click.Choice(["auto", "on", "off"]),
              help="CUDA graph (auto: with a non-reference --impl on a GPU)")
@click.option("--overlap", default="all", show_default=True,
              help="sites whose independent work runs on a side stream (CUDA): all, none, or a comma list of "
                   "attention (compressor + indexer beside the q path), shared_expert (beside the gate and routed "
                   "experts)")
@click.option("--profile", is_flag=True, help="per-op attribution at every C (kernel times grouped by op)")
@click.option("--kernels", "kernel_rows", is_flag=True,
              help="print every op's kernels (by place in the op's calls) at every C; implies --profile")
@click.option("--ablate-tuned", is_flag=True,
              help="at every C, per op that ran a tuned config, time the step with and without that op's tuned "
                   "entries (its kernels on their defaults), alternately in --steps pairs on the same cache: which "
                   "tuned entries help or hurt the step (verdict from the paired differences)")
@click.option("--try", "tries", multiple=True, metavar="TRIAL",
              help="time the step with these configs against the step as it runs, in interleaved pairs at each C: "
                   "OP[@KEY=V[,V...]...]=JSON, several ops joined by ';' (e.g. 'moe_routed@T=16,64={\"GLUE\": "
                   "\"v4\"}'), the JSON's keys over the config each matching lookup finds (a tuned entry or the "
                   "default; {} the default instead of the entry); a part may instead set a stream or launch "
                   "setting, e.g. 'KERNELBENCH_KV_LANE_FORK=after' (the variables kernelbench/decoder/trials.py "
                   "STEP_SETTINGS lists; an unknown one is refused with the list); repeatable, one trial each "
                   "(kernelbench/decoder/trials.py)")
@click.option("--try-entries", "try_files", multiple=True, metavar="FILE", type=click.Path(dir_okay=False),
              help="one --try per entry of this tuned-config file (what `kernelbench tune --export FILE` wrote), "
                   "pinned at exactly its key; repeatable")
@click.option("--keep-faster", "keep_path", default=None, type=click.Path(dir_okay=False),
              help="with --try-entries: merge the entries the step judged faster (at every C where timed) into this "
                   "tuned-config file (created if absent), each with its step record")
@click.option("--try-control/--no-try-control", default=True, show_default=True,
              help="with --try / --try-entries / --ablate-tuned: first time the step captured again with nothing "
                   "changed (an A/A trial) at each C; a verdict stands only when its interval also clears the "
                   "control's move, of either sign")
@click.option("--module", "modules", multiple=True, help="a user kernel module (path or dotted name) to load")
@click.option("--use", "uses", multiple=True, help="OP=IMPL: run this implementation of one op (repeatable)")
@click.option("--seed", default=0, show_default=True, type=int)
@click.option("--json", "json_path", default=None, type=click.Path(dir_okay=False), help="write the results here")
@click.option("--db", "db_url", default=None, help="database URL (default $KERNELBENCH_DB or the user data dir)")
@click.option("--no-store", is_flag=True, help="do not write the results to the database")
def command(impl, device, base, layers, mtp, tp, batches, context_text, contexts, capacity, steps, warmup, graph,
            overlap, profile, kernel_rows, ablate_tuned, tries, try_files, keep_path, try_control, modules, uses, seed,
            json_path, db_url, no_store):
    """Decode step time vs C (and context), its fit a + b*C, and where the time goes."""
    from kernelbench import registry
    if impl == "triton" and device == "cpu" and os.environ.get("TRITON_INTERPRET") != "1":
        raise click.UsageError("--impl triton on a CPU needs TRITON_INTERPRET=1 (the Triton interpreter)")
    gpu = device.startswith("cuda")
    if gpu and not torch.cuda.is_available():
        raise click.UsageError(f"--device {device}: no CUDA device here")
    from kernelbench.decoder.trials import parse_trial, trials_from_entries
    from kernelbench.usage import UsageProblem, check_settings, config_keys
    try:
        overlap = parse_sites(overlap)
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="--overlap") from None
    try:
        for m in modules:
            registry.load_module(m)
        check_settings()         # a malformed pinned config or tuned-config file, before any work (issue 10 item 9)
        if not any(impl in registry.impls(o.name) for o in registry.ops()):
            raise click.UsageError(f"--impl {impl}: no op has an implementation of that name")
        overrides = db.parse_overrides(uses)
        layers = layers or (base if base and gpu else ("flash" if gpu else "short"))
        base = base or (layers if layers in ("tiny", "flash", "pro") else ("flash" if gpu else "tiny"))
        cfg = db.bench_config(base, layers, mtp)
        context = db.parse_context(context_text or ("64" if base == "tiny" else "512"))
        swept = [db.parse_context(c) for c in contexts.split(",") if c.strip()] if contexts else []
    except (db.BenchError, FileNotFoundError, ImportError, UsageProblem) as e:
        raise click.UsageError(str(e)) from None
    if keep_path and not try_files:
        raise click.UsageError("--keep-faster needs --try-entries (the entries to judge)")
    known_ops = {o.name for o in registry.ops()}
    try:
        trials = [parse_trial(t, known_ops, config_keys) for t in tries]
        trials += [t for f in try_files for t in trials_from_entries(f, known_ops, config_keys)]
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="--try / --try-entries") from None
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
    steps = steps or (20 if gpu else 3)
    warmup = warmup if warmup is not None else (3 if gpu else 1)
    store = None
    if not no_store and ctx.rank == 0:
        from kernelbench.commands._common import open_store
        store = open_store(db_url)
    console = Console(width=180)
    from kernelbench.progress import steps as progress_steps
    plan = _ints(batches)
    profile = profile or kernel_rows         # --kernels reads the attribution
    points = len(plan) + len(swept)         # each timed, then (--profile) attributed in a second pass
    with progress_steps("decode-bench", points * (2 if profile else 1), enabled=ctx.rank == 0,
                        console=console) as advance:
        try:   # (a bar on a terminal, numbered lines in a log: kernelbench/progress.py)
            res = db.run_bench(ctx, cfg, impl, device, plan, context, steps, warmup, graph, seed=seed,
                               profile=profile, contexts=swept, capacity=capacity, overrides=overrides,
                               gbps=db.ceiling_gbps(device, store), progress=lambda i, what: advance(what),
                               ablate=ablate_tuned, overlap=overlap, trials=trials,
                               try_control=try_control)
        except db.BenchError as e:
            raise click.UsageError(str(e)) from None
    if ctx.rank != 0:
        return
    db.print_result(res, console, kernels=kernel_rows)
    if ablate_tuned and not any(p.ablation for p in res.points):
        console.print("--ablate-tuned: no kernel of the step ran a tuned config on this device; nothing to remove")
    if keep_path:
        from kernelbench.decoder.trials import faster_entries
        from kernelbench.harness.tune import merge_entries
        command = "kernelbench decode-bench " + " ".join(sys.argv[2:])
        kept = []
        for f in try_files:
            entries, lines = faster_entries(f, res.points, command)
            kept += entries
            for line in lines:
                console.print(line)
        merge_entries(Path(keep_path), kept)
        console.print(f"--keep-faster: {len(kept)} entries merged into {keep_path}")
    if json_path:
        with open(json_path, "w") as f:
            json.dump(db.as_json(res), f, indent=1)
    if store is not None:
        from kernelbench.harness.fingerprint import fingerprint, git_commit
        tag = "decode:" + _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        n = db.store_result(store, store.environment_id(fingerprint(device)), res, tag, git_commit())
        console.print(f"{n} points stored with run tag {tag} (kernelbench report reads them)")
