"""Launches per op of one decode step, counted on the CPU (no GPU): every Triton kernel launch (recorded
by the sm_120 inspector's `capture`, so nothing runs and Flash-sized shapes cost nothing) and every torch
op that would launch a kernel on a GPU (a TorchDispatchMode sees each aten op; views, empty allocations
and metadata ops launch nothing), each under the op (docs/OPS.md) whose call it happened in, or
"(outside ops)" for the decoder's own torch glue. Host reads (`.item()`, `.tolist()`) are counted as
"sync" (a decode step must have none: it would break CUDA-graph capture).

    python -m kernelbench.decoder.launch_count --layers short --batches 1,64     # Flash TP8 rank-0 shapes
    python -m kernelbench.decoder.launch_count --batches 1,64 --use attention_front=triton_parts --use attention_q=triton_parts

Counts are launches, not kernels: one aten op may launch a few kernels on a GPU (cat of many tensors,
advanced indexing); decode-bench --profile on a GPU reports the kernels themselves (per op and per layer).
"""
from __future__ import annotations

import argparse
from collections import Counter
from dataclasses import dataclass, field

import torch
from torch.utils._python_dispatch import TorchDispatchMode

OUTSIDE = "(outside ops)"

# aten ops that launch nothing on a GPU: allocation without initialisation and metadata
_FREE = {"empty", "empty_strided", "empty_like", "new_empty", "new_empty_strided", "detach", "lift_fresh", "alias",
         "_reshape_alias", "view", "_unsafe_view", "as_strided", "expand", "slice", "select", "unsqueeze",
         "squeeze", "permute", "transpose", "t", "split", "split_with_sizes", "unbind", "chunk", "narrow",
         "view_as_real", "view_as_complex", "unflatten", "flatten", "reshape", "diagonal", "set_", "resize_",
         "record_stream", "is_same_size", "sym_size", "sym_stride", "sym_numel", "sym_storage_offset",
         "_has_compatible_shallow_copy_type", "dim", "size", "stride", "is_contiguous", "numel",
         "_to_copy_noop"}
_SYNC = {"_local_scalar_dense", "item", "tolist", "nonzero", "equal", "is_nonzero"}


@dataclass
class Counts:
    """Launches of one step: per op name, the Triton kernels and the torch ops (aten names) it launched."""
    triton: Counter = field(default_factory=Counter)         # op -> Triton launches
    torch_ops: dict = field(default_factory=dict)            # op -> Counter(aten name -> launches)
    calls: Counter = field(default_factory=Counter)          # op -> calls
    syncs: Counter = field(default_factory=Counter)          # op -> host reads

    def launches(self, op: str) -> int:
        return self.triton[op] + sum(self.torch_ops.get(op, Counter()).values())

    def total(self) -> int:
        return sum(self.launches(op) for op in set(self.triton) | set(self.torch_ops))

    def rows(self) -> list[tuple[str, int, int, int, str]]:
        """(op, calls, triton launches, torch launches, torch op names) sorted by launches."""
        out = []
        for op in sorted(set(self.triton) | set(self.torch_ops) | set(self.calls)):
            t = self.torch_ops.get(op, Counter())
            out.append((op, self.calls[op], self.triton[op], sum(t.values()),
                        ", ".join(f"{k} x{v}" for k, v in sorted(t.items()))))
        out.sort(key=lambda r: (-(r[2] + r[3]), r[0]))
        return out


class _TorchOps(TorchDispatchMode):
    def __init__(self, counts: Counts, current: list[str]):
        super().__init__()
        self.counts, self.current = counts, current

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func.overloadpacket.__name__
        op = self.current[-1]
        out = func(*args, **(kwargs or {}))
        if name in _SYNC:
            self.counts.syncs[op] += 1
        elif name == "to":          # under inference mode a cast arrives as aten.to (not _to_copy): a launch if it copied
            if out is not args[0]:
                self.counts.torch_ops.setdefault(op, Counter())[name] += 1
        elif name not in _FREE and not func.is_view:
            self.counts.torch_ops.setdefault(op, Counter())[name] += 1
        return out


class CountingOps:
    """Wraps a backend.Ops: each op call sets the op that launches are counted under."""

    def __init__(self, ops, counts: Counts, current: list[str], launches: list):
        self._ops, self._counts, self._current, self._launches = ops, counts, current, launches

    @property
    def fallbacks(self):
        return self._ops.fallbacks

    def prepare(self, op, weights):
        return self._ops.prepare(op, weights)

    def accepts(self, op, name):
        return self._ops.accepts(op, name)

    def fuses(self, op, parts):
        return self._ops.fuses(op, parts)

    def __getattr__(self, op: str):
        fn = getattr(self._ops, op)

        def counted(**kw):
            self._counts.calls[op] += 1
            self._current.append(op)
            n0 = len(self._launches)
            try:
                return fn(**kw)
            finally:
                self._current.pop()
                self._counts.triton[op] += len(self._launches) - n0      # ops do not nest in the decoder
        return counted


def count_step(model, ids: torch.Tensor, positions: torch.Tensor, seq_ids: torch.Tensor, cache) -> Counts:
    """Launches of one decode step of `model` (CPU tensors; Triton kernels recorded, not run)."""
    from kernelbench.harness.inspector import capture
    counts, current = Counts(), [OUTSIDE]
    plain = model.env.ops
    try:
        with capture() as launches, _TorchOps(counts, current):
            model.env.ops = CountingOps(plain, counts, current, launches)
            model.decode(ids, positions, seq_ids, cache, check=False)
    finally:
        model.env.ops = plain
    return counts


def build(base: str = "flash", layers: str = "short", tp: int = 8, batch: int = 1, context: int = 512, seed: int = 0,
          overrides: dict | None = None):
    """A Triton-backed model of `base` widths (TP rank-0 shapes) with cheap weights, its cache filled, and one
    step's inputs -> (model, ids, positions, seq_ids, cache)."""
    from kernelbench.decoder import checkpoint
    from kernelbench.decoder.backend import Ops
    from kernelbench.decoder.decode_bench import bench_config
    from kernelbench.harness.inspector import cheap_random
    from kernelbench.decoder.model import Transformer
    from kernelbench.decoder.tp import TPContext
    cfg = bench_config(base, layers)
    tpc = TPContext(rank=0, world=tp, simulate=tp > 1)
    with cheap_random():
        sd = checkpoint.random_local_state(cfg, tpc.rank, tpc.world, seed=seed)
    with capture_quiet():
        model = Transformer(cfg, sd, Ops("triton", overrides), tpc, "cpu")
    cache = model.new_cache(batch, context + 8)
    ids = torch.zeros(batch, dtype=torch.long)
    positions = torch.full((batch,), context, dtype=torch.long)
    seq_ids = torch.arange(batch)
    return model, ids, positions, seq_ids, cache


def capture_quiet():
    """Load-time weight preparation may launch kernels: record them (nothing runs on the CPU)."""
    from kernelbench.harness.inspector import capture
    return capture()


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description="launches per op of one decode step, counted on the CPU")
    p.add_argument("--config", default="flash")
    p.add_argument("--layers", default="short")
    p.add_argument("--tp", type=int, default=8)
    p.add_argument("--batches", default="1", help="comma list of C")
    p.add_argument("--use", action="append", default=[], metavar="OP=IMPL", help="run this implementation of one op")
    a = p.parse_args(argv)
    from kernelbench.decoder.decode_bench import parse_overrides
    batches = [int(b) for b in a.batches.split(",")]
    model, *_ = build(a.config, a.layers, a.tp, batches[0], overrides=parse_overrides(a.use))
    n_layers = model.cfg.n_layers
    for c in batches:
        cache = model.new_cache(c, 520)
        c_ = count_step(model, torch.zeros(c, dtype=torch.long), torch.full((c,), 512, dtype=torch.long),
                        torch.arange(c), cache)
        use = "".join(f", {u}" for u in a.use)
        print(f"{model.cfg.name}, TP{a.tp} rank 0, C={c}{use}: {c_.total()} launches per step, "
              f"{c_.total() / n_layers:.1f} per layer ({n_layers} layers)")
        print(f"{'op':24s} {'calls':>5s} {'triton':>6s} {'torch':>5s}  torch ops")
        for op, calls, tr, to, names in c_.rows():
            print(f"{op:24s} {calls:5d} {tr:6d} {to:5d}  {names}")
        if sum(c_.syncs.values()):
            print("host reads (CPU-only checks in the wrappers):", dict(c_.syncs))


if __name__ == "__main__":
    main()
