"""The whole decoder, measured as users measure it: decode step time against the number of
concurrent requests C and against context, full depth by default on a GPU, with per-op attribution
that adds up to the step (`kernelbench decode-bench` is a thin command over this module).

    layers:     "flash" / "pro" / "tiny" (that config's own layer list: Flash 43 layers, 3 hash
                layers), "short" (swa,csa,hca,csa: quick runs, the CPU default), or a comma list
    context:    "512" (every sequence), "512:65536" (log-uniform per sequence, seeded) or "@FILE"
                (lengths, whitespace or comma separated, used in order and cycled)
    attribution: each op's time from the kernels it launched. An eager step is profiled with one
                record_function range per op call; every kernel is assigned to the innermost op range
                around its launch. With a CUDA graph, the replayed kernels (the same sequence the eager
                step launched) take their op from their position in that sequence, so the rows are the
                graph's own kernel times; what is left of the step is the idle time between kernels.

On one GPU the TP8 per-rank shapes run with the collectives skipped. Weights are random; caches are
filled with random values and each sequence starts at its context length (no prefill): step time
depends on shapes and lengths, not on values.
"""
from __future__ import annotations

import bisect
import contextlib
import math
from collections import Counter
import random
import re
import statistics
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

import torch

from kernelbench import tuned_configs
from kernelbench.db.values import canonical_json
from kernelbench.decoder import checkpoint
from kernelbench.harness import scaling as sc
from kernelbench.harness.timing import sync
from kernelbench.kernels.common import (FP8_PROMOTE_DEFAULT, HADAMARD_DEFAULT, fp8_promote, hadamard_mode,
                                       new_stream, pdl_on, priority_label)
from kernelbench.decoder.backend import Ops
from kernelbench.config import CONFIGS, ModelConfig
from kernelbench.decoder.model import Step, Transformer
from kernelbench.decoder.lanes import SITES, Lanes
from kernelbench.ops.moe import routing_of, routing_read
from kernelbench.decoder.tp import COLLECTIVES, TPContext
from kernelbench.decoder.trials import paired_cells, pinned_keys, print_trials, settings_applied

KIND_RATIO = {"swa": 0, "csa": 4, "hca": 128}
SHORT = "swa,csa,hca,csa"
OUTSIDE = "(outside ops)"          # kernels launched outside any op range (embedding glue, residual adds)
IDLE = "(idle between kernels)"    # step time no kernel ran in
OVERLAP = "(beside other kernels)"  # kernel time the op rows count that ran beside another kernel (two streams):
                                    # op rows - OVERLAP + IDLE = the step
NOT_OPS = (IDLE, OVERLAP)


class BenchError(ValueError):
    """A usage error (bad layers, context, override): one line for the user."""


# ------------------------------------------------------------------------------------------------
# configuration: layers, MTP, contexts
# ------------------------------------------------------------------------------------------------
def bench_config(base: str, layers: str = SHORT, mtp: bool = False) -> ModelConfig:
    """The widths of `base` with the layer list `layers`: a config name (its own list, hash layers and
    MTP ratio), "short", or a comma list of swa, csa, hca. `mtp` adds the config's MTP layer."""
    cfg = CONFIGS[base]
    spec = layers.strip().lower()
    if spec in CONFIGS:
        own = CONFIGS[spec]
        ratios, n_hash = own.compress_ratios[:own.n_layers], own.n_hash_layers
        mtp_ratios = own.compress_ratios[own.n_layers:][:1] or (0,)
        name = f"{base}" if spec == base else f"{base}-{spec}-layers"
    else:
        kinds = [k.strip() for k in (SHORT if spec == "short" else spec).split(",") if k.strip()]
        bad = [k for k in kinds if k not in KIND_RATIO]
        if not kinds or bad:
            raise BenchError(f"--layers takes flash, pro, tiny, short or a comma list of swa, csa, hca; "
                             f"got {layers!r}")
        ratios = tuple(KIND_RATIO[k] if base != "tiny" or k != "hca" else 8 for k in kinds)
        n_hash, mtp_ratios = min(1, len(kinds)), (0,)
        name = f"{base}-{'-'.join(kinds)}"
    extra = tuple(mtp_ratios) if mtp else ()
    return cfg.replace(name=name + ("+mtp" if mtp else ""), n_layers=len(ratios), compress_ratios=tuple(ratios) + extra,
                       n_mtp_layers=len(extra), n_hash_layers=min(n_hash, len(ratios)))


@dataclass(frozen=True)
class ContextSpec:
    """Tokens already in each sequence: fixed, log-uniform in [lo, hi] per sequence, or a list."""
    text: str
    lo: int
    hi: int
    values: tuple[int, ...] = ()

    def lengths(self, c: int, seed: int = 0) -> list[int]:
        if self.values:
            return [self.values[i % len(self.values)] for i in range(c)]
        if self.lo == self.hi:
            return [self.lo] * c
        rng = random.Random(seed * 1_000_003 + c)
        a, b = math.log(self.lo), math.log(self.hi)
        return [min(self.hi, max(self.lo, round(math.exp(rng.uniform(a, b))))) for _ in range(c)]

    @property
    def max_len(self) -> int:
        return max(self.values) if self.values else self.hi


def parse_context(text: str) -> ContextSpec:
    """'512', '512:65536' or '@FILE' -> ContextSpec (BenchError with one line on bad input)."""
    text = str(text).strip()

    def positive(v: str, what: str) -> int:
        try:
            n = int(v)
        except ValueError:
            raise BenchError(f"--context: {what} {v!r} is not an integer") from None
        if n < 1:
            raise BenchError(f"--context: {what} must be >= 1 token, got {n}")
        return n

    if text.startswith("@"):
        path = Path(text[1:])
        try:
            words = path.read_text().replace(",", " ").split()
        except OSError as e:
            raise BenchError(f"--context {text}: cannot read {path}: {e.strerror or e}") from None
        if not words:
            raise BenchError(f"--context {text}: {path} holds no lengths")
        vals = tuple(positive(w, f"length in {path}") for w in words)
        return ContextSpec(text, min(vals), max(vals), vals)
    if ":" in text:
        lo_s, _, hi_s = text.partition(":")
        lo, hi = positive(lo_s, "lower bound"), positive(hi_s, "upper bound")
        if lo > hi:
            raise BenchError(f"--context {text}: lower bound above upper bound")
        return ContextSpec(text, lo, hi)
    n = positive(text, "length")
    return ContextSpec(text, n, n)


def parse_overrides(items: Iterable[str]) -> dict[str, str]:
    """['moe_experts=mine', ...] -> {op: impl}, each checked against the registry."""
    from kernelbench import registry
    out = {}
    for item in items:
        op, sep, impl = item.partition("=")
        if not sep or not op.strip() or not impl.strip():
            raise BenchError(f"--use takes OP=IMPL, got {item!r}")
        try:
            registry.get_impl(op.strip(), impl.strip())
        except registry.RegistryError as e:
            raise BenchError(f"--use {item}: {e}") from None
        out[op.strip()] = impl.strip()
    return out


# ------------------------------------------------------------------------------------------------
# attribution: pure functions over kernel records (tested on CPU with synthetic records)
# ------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Range:
    """An op's range on the host: [start, end) in ns."""
    op: str
    start: int
    end: int


@dataclass(frozen=True)
class Kernel:
    """A kernel (or memcpy/memset) on the device: its name, GPU duration (ns), and the host time of its
    launch (None when unknown, e.g. a kernel replayed from a CUDA graph)."""
    name: str
    dur: int
    launch: int | None = None
    op: str | None = None           # set when the op is already known (positional labelling)
    start: int = 0                  # GPU start (ns): the order kernels ran in
    slot: int = 0                   # its place among the kernels its op call launched (0 = first)
    stream: int = 0                 # the CUDA stream it ran on (the profiler's device resource id)
    # the lane it belongs to: the stream of the same kernel in the eager step. A replayed CUDA graph runs its
    # branches on streams of the driver's choosing (42 of them in one C = 1 step on the H200), so a replayed kernel's
    # own stream does not say which lane launched it
    lane: int | None = None


@dataclass
class Row:
    """One op's share of a step: calls per step, GPU ms per step, bytes per step."""
    op: str
    calls: float
    gpu_ms: float
    bytes: float = 0.0
    kernels: float = 0.0
    # per kernel of the op's calls, in launch order: slot (place in its call), name, kernels and GPU ms per step
    by_kernel: list[dict] = field(default_factory=list)

    def as_json(self) -> dict:
        return {"op": self.op, "calls": self.calls, "gpu_ms": self.gpu_ms, "bytes": self.bytes, "kernels": self.kernels,
                "by_kernel": self.by_kernel}


def assign_ops(ranges: list[Range], kernels: list[Kernel]) -> list[Kernel]:
    """Each kernel with the op of the innermost range containing its launch (OUTSIDE if none) and its slot: how many
    kernels that same range launched before it (launch order)."""
    rs = sorted(ranges, key=lambda r: (r.start, -r.end))
    starts = [r.start for r in rs]
    import bisect
    out: list[Kernel | None] = [None] * len(kernels)
    launched: dict[int, int] = {}                 # range index -> kernels assigned so far
    order = sorted(range(len(kernels)), key=lambda j: (kernels[j].launch is None, kernels[j].launch or 0, j))
    for j in order:
        k = kernels[j]
        if k.op is not None:
            out[j] = k
            continue
        op, slot = OUTSIDE, 0
        if k.launch is not None:
            i = bisect.bisect_right(starts, k.launch)
            best = None
            for b in range(i):        # ranges that started at or before the launch; innermost = latest start
                if rs[b].end > k.launch and (best is None or rs[b].start >= rs[best].start):
                    best = b
            if best is not None:
                op, slot = rs[best].op, launched.get(best, 0)
                launched[best] = slot + 1
        out[j] = Kernel(k.name, k.dur, k.launch, op, k.start, slot, k.stream, k.lane)
    return out


def attribute(ranges: list[Range], kernels: list[Kernel], steps: int,
              op_bytes: dict[str, float] | None = None, step_ms: float | None = None) -> list[Row]:
    """Per-op rows per step from the kernels of `steps` steps: calls (ranges of that op), GPU ms (the
    durations of the kernels assigned to it), bytes (op_bytes, per step), sorted by time. Every kernel
    is counted once. With `step_ms`, a last row IDLE holds the step time no kernel covered; when the kernels carry
    their GPU start times and some ran side by side (the decoder's side stream, kernelbench.decoder.lanes), an
    OVERLAP row before it holds the time the op rows count twice (their sum minus the union of the kernels' spans)."""
    if steps < 1:
        raise ValueError("attribution needs at least one step")
    calls: dict[str, int] = {}
    for r in ranges:
        calls[r.op] = calls.get(r.op, 0) + 1
    ns: dict[str, int] = {}
    count: dict[str, int] = {}
    per_kernel: dict[tuple[str, int, str], list[int]] = {}          # (op, slot, name) -> [count, ns]
    for k in assign_ops(ranges, kernels):
        ns[k.op] = ns.get(k.op, 0) + k.dur
        count[k.op] = count.get(k.op, 0) + 1
        acc = per_kernel.setdefault((k.op, k.slot, work_name(k.name)), [0, 0])
        acc[0] += 1
        acc[1] += k.dur
    by_op: dict[str, list[dict]] = {}
    for (op, slot, name), (n, dur) in sorted(per_kernel.items(), key=lambda kv: (kv[0][0], kv[0][1], -kv[1][1])):
        by_op.setdefault(op, []).append({"slot": slot, "name": name, "count": n / steps, "gpu_ms": dur / 1e6 / steps})
    op_bytes = op_bytes or {}
    rows = [Row(op, calls.get(op, 0) / steps, ns.get(op, 0) / 1e6 / steps, op_bytes.get(op, 0.0),
                count.get(op, 0) / steps, by_op.get(op, [])) for op in set(calls) | set(ns)]
    rows.sort(key=lambda r: (-r.gpu_ms, r.op))
    if step_ms is not None:
        busy = sum(r.gpu_ms for r in rows)
        if kernels and all(k.start for k in kernels):
            covered = covered_ns(kernels) / 1e6 / steps
            if busy - covered > 1e-4:
                rows.append(Row(OVERLAP, 0, busy - covered))
                busy = covered
        rows.append(Row(IDLE, 0, max(0.0, step_ms - busy)))
    return rows


def lane_times(kernels: list[Kernel], steps: int) -> dict:
    """Where the step's lanes spent their time, per step (ms), from kernels with GPU starts and lanes (a kernel's
    `lane`, else its stream): the main lane (the one with the most kernel time) busy, the other lanes (the side lane,
    kernelbench.decoder.lanes; NCCL's stream) busy, and `side_alone_ms`: the time only other lanes ran, no
    main-lane kernel: side work the step waited for (the main lane idle or at a join) instead of hiding it, and
    `side_alone_by_op_ms`: per op, its side kernels' time outside the main lane's spans (largest first; side kernels
    that ran beside each other count once each, so the values may sum to more than side_alone_ms). Empty with one
    lane. ("streams" counts the lanes.)"""
    by: dict[int, list[Kernel]] = {}
    for k in kernels:
        by.setdefault(k.stream if k.lane is None else k.lane, []).append(k)
    if len(by) < 2 or not all(k.start for k in kernels):
        return {}
    main = max(by, key=lambda st: (sum(k.dur for k in by[st]), -st))
    side = [k for st, ks in by.items() if st != main for k in ks]
    spans = merged_spans(by[main])
    main_ns = sum(hi - lo for lo, hi in spans)
    alone: dict[str, int] = {}
    for k in side:
        ns = k.dur - overlap_ns(k.start, k.start + k.dur, spans)
        if ns > 0:
            alone[k.op or UNLABELLED] = alone.get(k.op or UNLABELLED, 0) + ns
    by_op = {op: ns / 1e6 / steps for op, ns in sorted(alone.items(), key=lambda kv: (-kv[1], kv[0]))}
    return {"streams": len(by), "main_ms": main_ns / 1e6 / steps, "side_ms": covered_ns(side) / 1e6 / steps,
            "side_alone_ms": (covered_ns(kernels) - main_ns) / 1e6 / steps, "side_alone_by_op_ms": by_op}


UNLABELLED = "(no op)"


def merged_spans(kernels: list[Kernel]) -> list[tuple[int, int]]:
    """The kernels' GPU spans [start, start + dur) merged into disjoint intervals, in order."""
    out: list[tuple[int, int]] = []
    for k in sorted(kernels, key=lambda k: k.start):
        lo, hi = k.start, k.start + k.dur
        if out and lo <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    return out


def overlap_ns(lo: int, hi: int, spans: list[tuple[int, int]]) -> int:
    """How much of [lo, hi) the disjoint, ordered `spans` cover."""
    i = bisect.bisect_right(spans, (lo, float("inf"))) - 1
    total = 0
    for a, b in spans[max(i, 0):]:
        if a >= hi:
            break
        total += max(0, min(b, hi) - max(a, lo))
    return total


def covered_ns(kernels: list[Kernel]) -> int:
    """The length of the union of the kernels' GPU spans [start, start + dur) (ns)."""
    return sum(hi - lo for lo, hi in merged_spans(kernels))


# A device-to-device cudaMemcpyAsync is a copy engine's "Memcpy DtoD" when launched, and the driver's copy
# kernel (memcpy32_post, ...) when replayed from a CUDA graph: the same work, under two names (seen on the H200
# at world 1, where NCCL's in-place all-reduce copies: docs/perf/tp_nccl.md).
_GRAPH_COPY_KERNEL = re.compile(r"memcpy\d*_\w+")


def work_name(name: str) -> str:
    """The name the eager and the replayed step share for the same work (device copies under one name)."""
    return "device copy" if name.startswith("Memcpy DtoD") or _GRAPH_COPY_KERNEL.fullmatch(name) else name


def label_by_position(eager: list[Kernel], replay: list[Kernel], steps: int) -> tuple[list[Kernel], str]:
    """Give the kernels of `steps` graph replays the ops of the eager step's kernels at the same
    position (names compared through `work_name`). Kernels on another stream (NCCL's collectives) can
    start in another order than in the eager step: then the k-th kernel of a name in each replayed step
    takes the op of the k-th kernel of that name in the eager step. -> (labelled kernels, "" or why the
    sequences do not line up: then nothing is labelled)."""
    n = len(eager)
    if n == 0 or len(replay) != n * steps:
        return [], f"{len(replay)} replayed kernels for {steps} steps, the eager step launched {n}"
    mismatched = sum(work_name(replay[s * n + i].name) != work_name(eager[i].name) for s in range(steps) for i in range(n))
    if not mismatched:
        return [Kernel(k.name, k.dur, None, eager[i % n].op, k.start, eager[i % n].slot, k.stream, eager[i % n].stream)
                for i, k in enumerate(replay)], ""
    ops_of: dict[str, list] = {}
    for k in eager:
        ops_of.setdefault(work_name(k.name), []).append((k.op, k.slot, k.stream))
    out = []
    for s in range(steps):
        seen: dict[str, int] = {}
        for k in replay[s * n:(s + 1) * n]:
            w = work_name(k.name)
            i = seen[w] = seen.get(w, -1) + 1
            if i >= len(ops_of.get(w, ())):
                return [], (f"{mismatched} of {n * steps} replayed kernels differ in name from the eager step's, "
                            f"and replayed step {s} runs other kernels: "
                            f"{_name_difference(replay[s * n:(s + 1) * n], eager)}")
            op, slot, lane = ops_of[w][i]
            out.append(Kernel(k.name, k.dur, None, op, k.start, slot, k.stream, lane))
    return out, ""


def _name_difference(replayed: list[Kernel], eager: list[Kernel], shown: int = 3) -> str:
    """What one replayed step runs that the eager step did not and the reverse, by kernel name and count
    (the labeller's refusal reason: which kernels the graph replaces)."""
    got, want = Counter(work_name(k.name) for k in replayed), Counter(work_name(k.name) for k in eager)

    def names(c: Counter) -> str:
        items = [f"{name[:80]} x{n}" for name, n in sorted(c.items())]
        return "; ".join(items[:shown] + ([f"{len(items) - shown} more"] if len(items) > shown else [])) or "none"
    return f"replay only [{names(got - want)}], eager only [{names(want - got)}]"


# ------------------------------------------------------------------------------------------------
# bytes per op call (the bandwidth roofline of the step)
# ------------------------------------------------------------------------------------------------
def _nbytes(t) -> float:
    return float(t.numel() * t.element_size()) if isinstance(t, torch.Tensor) else 0.0


def _out_bytes(out) -> float:
    if isinstance(out, (tuple, list)):
        return sum(_out_bytes(o) for o in out)
    return _nbytes(out)


SPARSE_ARGS = {"sparse_attention": ("kv",), "sparse_attention_wo_a": ("kv",), "indexer_topk": ("k_cache", "k_exp"),
               "compressor_step": ("key_codes", "key_exps"),
               "embedding": ("weight",),
               "moe_gate": ("tid2eid", "weight"), "moe_experts": ("w1", "w2", "w3", "s1", "s2", "s3"),
               "moe_layer": ("w1", "w2", "w3", "s1", "s2", "s3", "tid2eid", "weight"),
               "moe_routed": ("w1", "w2", "w3", "s1", "s2", "s3", "tid2eid", "weight")}
STATE_ARGS = ("window_cache", "cache", "state_kv", "state_score")     # per-sequence rows of caches and states


def call_bytes(op: str, kw: dict, out) -> float:
    """An estimate of the bytes one call must move: every tensor argument read once and every output
    written once, except what is read sparsely: the attended KV rows (sparse_attention), the scored
    key rows (indexer_topk), the chosen experts' weights and, in hash layers, their gate rows (MoE:
    ops/moe.py Routing), and one row per sequence of the step's caches and compressor states (read and
    written). Reads values on the host: eager steps only."""
    skip = set(SPARSE_ARGS.get(op, ())) | set(STATE_ARGS)
    total = sum(_nbytes(v) for k, v in kw.items() if k not in skip) + _out_bytes(out)
    if op in ("sparse_attention", "sparse_attention_wo_a"):
        kv, lengths = kw["kv"], kw.get("lengths")
        rows = float(lengths.sum()) if isinstance(lengths, torch.Tensor) else float((kw["indices"] >= 0).sum())
        total += rows * kv.shape[-1] * kv.element_size()
    elif op == "indexer_topk":
        keys = float(((kw["positions"] + 1) // kw.get("ratio", 4)).sum())
        total += sum(keys * t.shape[-1] * t.element_size() for t in (kw["k_cache"], kw.get("k_exp"))
                     if isinstance(t, torch.Tensor))
    elif op == "compressor_step" and isinstance(kw.get("key_codes"), torch.Tensor):   # the FP4 key cache's write:
        emitted = float(((kw["positions"] + 1) % kw["ratio"] == 0).sum())        # each emitting token's packed key
        total += emitted * (kw["key_codes"].shape[-1] + kw["key_exps"].shape[-1])
    elif op == "embedding":        # the rows of the step's ids
        w = kw["weight"]
        total += kw["ids"].numel() * w.shape[-1] * w.element_size()
    elif op in ("moe_gate", "moe_experts", "moe_layer", "moe_routed"):
        w = [kw[k] for k in ("w1", "w2", "w3", "s1", "s2", "s3") if isinstance(kw.get(k), torch.Tensor)]
        n_local = w[0].shape[0] if w else 1
        # what this call routes to (the gate inside moe_routed / moe_layer: the reference gate's choice)
        r = routing_read({"offset": kw.get("expert_offset", 0), "El": n_local,
                          "hash": isinstance(kw.get("tid2eid"), torch.Tensor),
                          "E": kw["weight"].shape[0] if isinstance(kw.get("weight"), torch.Tensor) else 0},
                         routing_of(kw))
        total += sum(_nbytes(t) for t in w) * r.local / max(1, n_local)
        if isinstance(kw.get("weight"), torch.Tensor):     # the gate rows the scores need
            total += r.gate_rows * kw["weight"].shape[1] * kw["weight"].element_size()
    if isinstance(kw.get("tid2eid"), torch.Tensor):      # hash routing reads the rows of the step's tokens
        t = kw["tid2eid"]
        total += kw["token_ids"].numel() * t.shape[-1] * t.element_size()
    n_seq = kw["seq_ids"].numel() if isinstance(kw.get("seq_ids"), torch.Tensor) else 0
    for k in STATE_ARGS:
        t = kw.get(k)
        if isinstance(t, torch.Tensor) and t.dim() >= 2 and n_seq:
            total += 2 * _nbytes(t) / (t.shape[0] * t.shape[1]) * n_seq
    return total


class RecordingOps:
    """Ops whose every call is counted, its bytes estimated (call_bytes) and, with `ranges`, wrapped in
    a record_function range named after the op."""

    def __init__(self, ops: Ops, ranges: bool = False, measure_bytes: bool = True):
        self._ops, self._ranges, self._measure = ops, ranges, measure_bytes
        self.calls: dict[str, int] = {}
        self.bytes: dict[str, float] = {}

    @property
    def fallbacks(self):
        return self._ops.fallbacks

    def accepts(self, op: str, name: str) -> bool:
        return self._ops.accepts(op, name)

    def fuses(self, op: str, parts: tuple[str, ...]) -> bool:
        return self._ops.fuses(op, parts)

    def __getattr__(self, op: str):
        fn = getattr(self._ops, op)
        if not callable(fn):
            return fn

        def recorded(**kw):
            if self._ranges:
                with torch.profiler.record_function(op):
                    out = fn(**kw)
            else:
                out = fn(**kw)
            self.calls[op] = self.calls.get(op, 0) + 1
            if self._measure:
                self.bytes[op] = self.bytes.get(op, 0.0) + call_bytes(op, kw, out)
            return out
        return recorded


# ------------------------------------------------------------------------------------------------
# the benchmark
# ------------------------------------------------------------------------------------------------
@dataclass
class BenchPoint:
    batch: int
    context: float                       # mean tokens already in a sequence
    step_ms: float                       # median over the timed steps
    p10_ms: float
    p90_ms: float
    q1_ms: float
    q3_ms: float
    tokens_per_s: float
    roofline_ms: float = math.nan        # bytes the step must move / copy bandwidth
    bytes: float = 0.0
    kernels_per_step: float = 0.0
    kernels_per_layer: float = 0.0
    attribution: list[dict] = field(default_factory=list)   # [{op, calls, gpu_ms, bytes, kernels, by_kernel}] per step
    attribution_source: str = ""         # "graph replay kernels", "eager kernels", "host time"
    attribution_note: str = ""
    lanes: dict = field(default_factory=dict)   # lane_times of the attributed kernels (two streams or more)
    samples_ms: list[float] = field(default_factory=list)
    configs: list[dict] = field(default_factory=list)   # how each kernel found its config (tuned_configs.Resolution)
    ablation: list[dict] = field(default_factory=list)  # --ablate-tuned: per op, with vs without its tuned entries
    trials: list[dict] = field(default_factory=list)    # --try: per trial, the step with its configs vs without
    control: dict = field(default_factory=dict)         # the A/A control of --try / --ablate-tuned (control_trial)


@dataclass
class BenchResult:
    config: str
    impl: str
    device: str
    tp: int
    simulated_tp: bool
    context: str
    capacity: int
    graph: bool
    layers: int = 0
    mtp: bool = False
    overrides: dict = field(default_factory=dict)
    gbps: float = math.nan               # the copy-bandwidth ceiling used for roofline and % columns
    overlap: str = "all"                 # the sites that ran on the side stream (kernelbench.decoder.lanes), or none
    shared_split: bool = False           # the model split the shared expert over the TP ranks (decoder.model.shared_split)
    stream_priority: str = "off"         # the stream kinds at the highest priority (kernels/common.py stream_priority)
    kv_lane: str = "off"                 # the KV compressor step on a lane of its own: off / on / up to N tokens
    hadamard: str = HADAMARD_DEFAULT     # the kernels' Hadamard rotations (kernels/common.py KERNELBENCH_HADAMARD)
    fp8_promote: int = int(FP8_PROMOTE_DEFAULT)    # products per full-fp32 add in the fp8 dots (FP8_PROMOTE)
    key_cache: str = "bf16"                        # the indexer key cache's form (KERNELBENCH_KEY_CACHE)
    graph_error: str = ""
    points: list[BenchPoint] = field(default_factory=list)          # vs C at --context
    context_points: list[BenchPoint] = field(default_factory=list)  # vs context at the smallest C
    fixed_ms: float = math.nan           # a in step = a + b*C
    per_request_ms: float = math.nan     # b
    fixed_ci_ms: float = math.nan        # 95% half-widths
    per_request_ci_ms: float = math.nan
    fit_r2: float = math.nan
    flags: list[str] = field(default_factory=list)
    fallbacks: list[str] = field(default_factory=list)
    unused_entries: list[dict] = field(default_factory=list)   # this device's tuned entries no lookup here used


def unused_entries(points: Iterable[BenchPoint], table: list[dict], device: str) -> list[dict]:
    """The entries of `table` tuned on `device` that no kernel config lookup of these points was answered from
    (exact or nearest: `tuned_key` on `device`): dead weight for this step (another shape set's keys, an op the step
    no longer calls, an impl's own keys), each as {op, key, config}. Stale entries cost nothing at run time, but a
    table that keeps entries for replaced ops hides that the replacement runs on its default (session 24: csa_indices
    replaced indexer_topk + attention_indices in the step; their entries stayed, unused)."""
    used = {(c["op"], canonical_json(c["tuned_key"])) for p in points for c in p.configs
            if c.get("tuned_key") is not None and c.get("tuned_device") == device}
    return [{"op": e["op"], "key": e["key"], "config": e["config"]} for e in table
            if e.get("device") == device and (e["op"], canonical_json(e["key"])) not in used]


def _time_one(run: Callable[[], None], dev: torch.device) -> float:
    """Wall ms of one `run()`, from an idle device to an idle device."""
    sync(dev)
    t0 = time.perf_counter()
    run()
    sync(dev)
    return 1e3 * (time.perf_counter() - t0)


def _time_steps(run, advance, steps: int, dev: torch.device) -> list[float]:
    out = []
    for _ in range(steps):
        out.append(_time_one(run, dev))
        advance()
    return out


def time_interleaved(a: Callable[[], None], b: Callable[[], None], advance: Callable[[], None], pairs: int,
                     dev: torch.device) -> tuple[list[float], list[float]]:
    """`pairs` rounds of one step of `a` and one of `b` at the same positions, then `advance`; the order within a
    round alternates A B, B A, A B, ... (A B B A over two rounds), so a drift of the machine over the rounds (clocks,
    temperature) weighs on both settings alike and neither always runs first. -> (a's ms, b's ms), one per round:
    the i-th of each form a pair."""
    a_ms, b_ms = [], []
    for i in range(pairs):
        if i % 2 == 0:
            a_ms.append(_time_one(a, dev))
            b_ms.append(_time_one(b, dev))
        else:
            b_ms.append(_time_one(b, dev))
            a_ms.append(_time_one(a, dev))
        advance()
    return a_ms, b_ms


def _is_gpu_work(e) -> bool:
    """A kernel, memcpy or memset on the device (not a device-side copy of a range, not a sync)."""
    from torch.autograd import DeviceType
    if e.device_type() == DeviceType.CPU or e.duration_ns() <= 0 or e.is_user_annotation():
        return False
    kind = str(e.activity_type() if hasattr(e, "activity_type") else "").lower()
    return "annotation" not in kind and "sync" not in kind


def _records(prof, op_names: set[str]) -> tuple[list[Range], list[Kernel]]:
    """torch.profiler (Kineto) events -> op ranges and device kernels with their launch's host time."""
    from torch.autograd import DeviceType
    evs = list(prof.profiler.kineto_results.events())
    ranges, kernels, launch_at, frontend = [], [], {}, {}
    for e in evs:
        if e.device_type() != DeviceType.CPU:
            continue
        if e.linked_correlation_id() > 0 or e.name().startswith("cu"):   # a runtime or driver call (cuLaunchKernel)
            launch_at[e.correlation_id()] = e.start_ns()
        else:
            frontend[e.correlation_id()] = e.start_ns()
            if e.name() in op_names and e.is_user_annotation():
                ranges.append(Range(e.name(), e.start_ns(), e.end_ns()))
    for e in evs:
        if not _is_gpu_work(e):
            continue
        t = launch_at.get(e.correlation_id(), frontend.get(e.linked_correlation_id()))
        kernels.append(Kernel(e.name(), e.duration_ns(), t, None, e.start_ns(), stream=e.device_resource_id()))
    return ranges, kernels


def _device_kernels_in_order(prof) -> list[Kernel]:
    ks = [e for e in prof.profiler.kineto_results.events() if _is_gpu_work(e)]
    ks.sort(key=lambda e: e.start_ns())
    return [Kernel(e.name(), e.duration_ns(), None, None, e.start_ns(), stream=e.device_resource_id()) for e in ks]


def _host_records(prof, op_names: set[str]) -> tuple[list[Range], list[Kernel]]:
    """CPU runs: each op range's exclusive host time stands in for its kernels."""
    evs = [e for e in prof.profiler.kineto_results.events() if e.name() in op_names and e.is_user_annotation()]
    ranges = [Range(e.name(), e.start_ns(), e.end_ns()) for e in evs]
    kernels = []
    for r in ranges:
        inner = sum(o.end - o.start for o in ranges if o is not r and r.start <= o.start and o.end <= r.end
                    and not any(m is not r and m is not o and r.start <= m.start and m.end <= r.end
                                and m.start <= o.start and o.end <= m.end for m in ranges))
        kernels.append(Kernel(r.op, max(0, r.end - r.start - inner), r.start))
    return ranges, kernels


def profile_step(model: Transformer, eager: Callable, replay: Callable | None, reset: Callable, dev: torch.device,
                 step_ms: float, op_bytes: dict[str, float], steps: int = 3
                 ) -> tuple[list[Row], str, str, float, dict]:
    """Attribution at one point -> (rows incl. IDLE, source, note, kernels per step, lane_times of the kernels
    attributed). The profiled eager step only adds ranges (no byte counting: it would launch kernels the graph does
    not have)."""
    from torch.profiler import ProfilerActivity, profile

    from kernelbench import registry
    names = {o.name for o in registry.ops()} | set(COLLECTIVES)       # collectives: their own rows
    plain = model.env.ops
    model.env.ops = RecordingOps(plain, ranges=True, measure_bytes=False)
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if dev.type == "cuda" else [])
    try:
        reset()
        with profile(activities=acts) as prof:
            eager()
            sync(dev)
    finally:
        model.env.ops = plain
    if dev.type != "cuda":
        ranges, kernels = _host_records(prof, names)
        rows = attribute(ranges, kernels, 1, op_bytes, step_ms)
        return rows, "host time", "", float(len(kernels)), {}
    ranges, kernels = _records(prof, names)
    labelled = assign_ops(ranges, kernels)
    if replay is None:
        return (attribute(ranges, labelled, 1, op_bytes, step_ms), "eager kernels", "", float(len(kernels)),
                lane_times(labelled, 1))
    reset()
    with profile(activities=[ProfilerActivity.CUDA]) as gprof:
        for _ in range(steps):
            replay()
        sync(dev)
    eager_seq = sorted(labelled, key=lambda k: k.start)
    got, why = label_by_position(eager_seq, _device_kernels_in_order(gprof), steps)
    if why:
        return (attribute(ranges, labelled, 1, op_bytes, step_ms), "eager kernels",
                f"graph replay not attributed ({why})", float(len(kernels)), lane_times(labelled, 1))
    calls_ranges = [r for _ in range(steps) for r in ranges]
    return (attribute(calls_ranges, got, steps, op_bytes, step_ms), "graph replay kernels", "", len(got) / steps,
            lane_times(got, steps))


def _quantiles(times: list[float]) -> tuple[float, float, float, float]:
    if len(times) < 2:
        return times[0], times[0], times[0], times[0]
    dec = statistics.quantiles(times, n=10, method="inclusive")
    qs = statistics.quantiles(times, n=4, method="inclusive")
    return dec[0], dec[-1], qs[0], qs[-1]


def random_model(tp: TPContext, cfg: ModelConfig, impl: str, dev: torch.device, seed: int = 0,
                 overrides: dict | None = None, overlap=True) -> Transformer:
    """This rank's model with random weights drawn on `dev` (what run_bench times when given no model)."""
    sd = checkpoint.random_local_state(cfg, tp.rank, tp.world, seed=seed, device=dev)
    return Transformer(cfg, sd, Ops(impl, overrides), tp, dev, overlap)


def run_bench(tp: TPContext, cfg: ModelConfig, impl: str, device: str, batches: list[int], context: ContextSpec,
              steps: int, warmup: int, graph: str, seed: int = 0, profile: bool = False,
              contexts: list[ContextSpec] = (), capacity: int | None = None, overrides: dict | None = None,
              gbps: float | None = None, progress: Callable[[int, str], None] | None = None,
              model: Transformer | None = None, ablate: bool = False, overlap=True, trials=(),
              try_control: bool = True) -> BenchResult:
    """Time the decode step at each C (at `context`) and at each of `contexts` (at the smallest C).
    `model`: time this model (built with `tp`, `cfg` and `impl`) instead of random weights drawn here.
    `overlap`: the sites whose independent work runs on a side stream (kernelbench.decoder.lanes.parse_sites: True
    for all, False for none); with none the step runs on one stream.
    `ablate`: at each C, also compare the step with and without each op's tuned entries, per op that ran a tuned
    config, in `steps` interleaved pairs (`ablate_tuned`).
    `trials` (kernelbench.decoder.trials.Trial): at each C, also time the step with each trial's configs against the
    step as it runs, in `steps` interleaved pairs (`try_configs`). With either, `try_control` times an A/A control
    first (`control_trial`) that both judge their verdicts against."""
    dev = torch.device(device)
    if model is None:
        model = random_model(tp, cfg, impl, dev, seed, overrides, overlap)
    else:
        model.env.lanes = Lanes(dev, overlap)
    use_graph = dev.type == "cuda" and (graph == "on" or (graph == "auto" and impl != "reference"))
    res = BenchResult(cfg.name, impl, str(dev), tp.world, tp.simulate, context.text, 0, use_graph,
                      layers=cfg.n_layers + cfg.n_mtp_layers, mtp=cfg.n_mtp_layers > 0, overrides=dict(overrides or {}),
                      gbps=gbps if gbps else math.nan, overlap=model.env.lanes.describe(),
                      shared_split=model.env.shared_split,
                      stream_priority=priority_label(),
                      kv_lane=model.env.lanes.kv_lane, hadamard=hadamard_mode(), fp8_promote=fp8_promote(),
                      key_cache=model.env.key_form)
    plan = _plan(batches, context, contexts, seed, steps, warmup, capacity)
    lo, hi = _id_range(tp, cfg)
    for i, (c, ctx, is_point, lengths, cap) in enumerate(plan):
        if progress:
            progress(i, f"C={c}, context {ctx.text}")
        res.capacity = max(res.capacity, cap)
        pt = _run_point(model, res, c, lengths, cap, lo, hi, steps, warmup, graph, seed, dev,
                        ablate=ablate and is_point, trials=trials if is_point else (), try_control=try_control)
        (res.points if is_point else res.context_points).append(pt)
        if dev.type == "cuda":
            torch.cuda.empty_cache()
    if profile:
        attribute_points(res, model, tp, batches, context, steps, warmup, graph, seed=seed, contexts=contexts,
                         capacity=capacity,
                         progress=(lambda i, what: progress(len(plan) + i, what)) if progress else None)
    _analyse(res)
    res.fallbacks = sorted(model.ops.fallbacks) if impl != "reference" else []
    res.unused_entries = unused_entries(res.points + res.context_points, tuned_configs.entries(),
                                        tuned_configs.current_device())
    return res


def _plan(batches: list[int], context: ContextSpec, contexts, seed: int, steps: int, warmup: int,
          capacity: int | None) -> list[tuple[int, ContextSpec, bool, list[int], int]]:
    """The points of a run in order: (C, context, on the C axis (else the context axis), lengths, capacity)."""
    out = []
    for c, ctx, is_point in [(c, context, True) for c in batches] + [(min(batches), x, False) for x in contexts]:
        lengths = ctx.lengths(c, seed)
        cap = capacity or (max(lengths) + warmup + steps + 16)
        if cap < max(lengths) + warmup + steps + 8:
            raise BenchError(f"--capacity {cap} is below the longest context + warmup + steps + 8")
        out.append((c, ctx, is_point, lengths, cap))
    return out


def _id_range(tp: TPContext, cfg: ModelConfig) -> tuple[int, int]:
    """Token ids to draw: with simulated TP, from this rank's vocab shard (the others would embed to zero rows)."""
    if not tp.simulate:
        return 0, cfg.vocab_size
    return tp.start(cfg.vocab_size), tp.start(cfg.vocab_size) + tp.part(cfg.vocab_size)


def attribute_points(res: BenchResult, model: Transformer, tp: TPContext, batches: list[int], context: ContextSpec,
                     steps: int, warmup: int, graph: str, seed: int = 0, contexts=(), capacity: int | None = None,
                     progress: Callable[[int, str], None] | None = None) -> None:
    """The per-op attribution of every point of `res` (timed by run_bench with the same arguments), each point's
    step rebuilt and profiled, its rows scaled to the point's timed step. Run it only after all timing in the
    process: once torch.profiler has run, its CUDA activity hooks stay and later graph replays are slower (H200,
    2026-12-02, one process: the 43-layer step at C = 16 / 64 took 8.61 / 13.91 ms before a profile, 9.20 / 14.53
    after; docs/perf/README.md, "Timing and the profiler")."""
    dev = torch.device(res.device)
    lo, hi = _id_range(tp, model.cfg)
    plan = _plan(batches, context, contexts, seed, steps, warmup, capacity)
    for i, ((c, ctx, _, lengths, cap), pt) in enumerate(zip(plan, res.points + res.context_points)):
        if progress:
            progress(i, f"attribution, C={c}, context {ctx.text}")
        _profile_point(model, res, pt, lengths, cap, lo, hi, warmup, graph, seed, dev)
        if dev.type == "cuda":
            torch.cuda.empty_cache()


ABLATION_CONFIDENCE = 0.95   # of the interval of the median paired difference that gives the verdict
# the fewest pairs whose sign-test interval exists: all n differences on one side has probability 2 / 2^n, which
# must be at most 1 - confidence (95%: 6 pairs; 5 pairs give 2/32 > 5%); median_interval returns None below it
ABLATION_MIN_PAIRS = next(n for n in range(1, 64) if 0.5 ** n <= (1 - ABLATION_CONFIDENCE) / 2)


def median_interval(values: list[float], confidence: float = ABLATION_CONFIDENCE) -> tuple[float, float] | None:
    """A distribution-free interval for the median of `values` (the sign test's): the k-th smallest and k-th
    largest value, with k the largest rank whose binomial(n, 1/2) tail P(X < k) is at most (1 - confidence) / 2, so
    the interval covers the median with probability >= `confidence` whatever the values' distribution (pairs of
    step times have outliers and skew: no normal assumption). None when n is too small for any such interval."""
    n = len(values)
    tail, k = 0.0, 0
    while k < n:
        nxt = tail + math.comb(n, k) / 2 ** n
        if nxt > (1 - confidence) / 2:
            break
        tail, k = nxt, k + 1
    if k == 0:
        return None
    ordered = sorted(values)
    return ordered[k - 1], ordered[n - k]


def paired_comparison(tuned_ms: list[float], ablated_ms: list[float]) -> dict:
    """The tuned and the ablated step's times, timed in interleaved pairs (`time_interleaved`), compared pair by
    pair: per pair the difference ablated - tuned (a drift shared by the two runs of a round cancels in it), and
    the verdict from the sign-test interval of the median difference (`median_interval`): "helps" (the tuned
    entries make the step faster) when the interval lies entirely above 0, "hurts" when entirely below, else
    "within noise"; no verdict under ABLATION_MIN_PAIRS pairs. -> the row's timing fields (ms): step_ms, q1_ms,
    q3_ms (the ablated step), tuned_ms (the tuned step's median), delta_ms (difference of the two medians),
    paired_delta_ms (median of the paired differences), delta_q1_ms, delta_q3_ms (their quartiles), delta_ci_ms
    ([lo, hi] of the verdict's interval, or None), pairs, verdict."""
    if len(tuned_ms) != len(ablated_ms) or not tuned_ms:
        raise ValueError(f"paired comparison needs as many tuned as ablated times, at least one: got "
                         f"{len(tuned_ms)} and {len(ablated_ms)}")
    diffs = [b - a for a, b in zip(tuned_ms, ablated_ms)]
    _, _, q1, q3 = _quantiles(ablated_ms)
    _, _, d1, d3 = _quantiles(diffs)
    ci = median_interval(diffs)
    if ci is None:
        verdict = f"too few pairs for a verdict (< {ABLATION_MIN_PAIRS})"
    elif ci[0] > 0:
        verdict = "helps"
    elif ci[1] < 0:
        verdict = "hurts"
    else:
        verdict = "within noise"
    step, tuned = statistics.median(ablated_ms), statistics.median(tuned_ms)
    return {"step_ms": step, "q1_ms": q1, "q3_ms": q3, "tuned_ms": tuned, "delta_ms": step - tuned,
            "paired_delta_ms": statistics.median(diffs), "delta_q1_ms": d1, "delta_q3_ms": d3,
            "delta_ci_ms": None if ci is None else list(ci), "pairs": len(diffs), "verdict": verdict}


def ablate_tuned(pt: BenchPoint, step: _PointStep, tuned: Callable[[], None],
                 capture: Callable[[Callable[[], None]], Callable[[], None]] | None, pairs: int,
                 dev: torch.device, control: dict | None = None) -> list[dict]:
    """For each op whose kernels ran a tuned config at this point (pt.configs): is the step faster with that op's
    tuned entries than with its kernels on their defaults? A per-op tune times the op alone; in the step, launches,
    caches and neighbours differ (session 5: compressor_step tuned to two launches at C=1 was faster alone and
    slower in the step).

    The two settings run on the same cache and inputs (`step`), alternately, in `pairs` rounds (`time_interleaved`):
    timed one after the other, the later runs drifted against the first (H200, session 7: every op's run without its
    entries was 0.25 to 0.31 ms slower at C=1 and 0.12 to 0.22 ms faster at C=64). `tuned` runs one tuned step (the
    point's CUDA graph replay, or its eager step); `capture` makes a replayable graph of an eager step (None: time
    eagerly). The step without an op's entries is a graph captured inside `tuned_configs.entries_without(op)`
    (kernels look their configs up when launched, so the graph holds the defaults' launches; the recorded lookups
    say so in `sources`), released after that op; eagerly, each of its runs hides the entries. Should that capture
    fail, both settings of that op are timed eagerly (`method` says so). -> one row per op: op, entries_removed,
    sources (the ablated step's lookups of that op by source), method, and `paired_comparison`'s fields. With
    `control` (`control_trial`'s row) a verdict is "helps" / "hurts" only when it clears the control's move
    (`controlled_verdict`), `raw_verdict` keeping the plain sign test's."""
    out = []
    for op in sorted({c["op"] for c in pt.configs if c["source"] in tuned_configs.TUNED_SOURCES}):
        method, runs, removed, looked = _setting_runs(lambda: tuned_configs.entries_without(op), step, tuned,
                                                      capture, dev, "the graph without its entries")
        a_ms, b_ms = _timed_pairs(runs, step, pairs, dev)
        sources = dict(Counter(r.source for r in tuned_configs.summarize(looked) if r.op == op))
        row = {"op": op, "entries_removed": removed, "sources": sources, "method": method,
               **paired_comparison(a_ms, b_ms)}
        if control:
            row.update(raw_verdict=row["verdict"], verdict=controlled_verdict(
                row["verdict"], row["delta_ci_ms"], control["delta_ci_ms"], ("helps", "hurts")))
        out.append(row)
    return out


def _setting_runs(setting: Callable[[], Any], step: _PointStep, base: Callable[[], None], capture, dev: torch.device,
                  what: str) -> tuple[str, list, Any, list]:
    """The step inside `setting` made ready to time against `base` (`_step_in`: a graph when `capture` is given);
    should that capture fail, both run eagerly and the method says so, naming `what`; an eager failure raises (a
    config a kernel refuses). -> (method, [run of the step as it is, run inside the setting], what the setting
    yielded, the Resolutions of its lookups)."""
    try:
        b, value, looked = _step_in(setting, step, capture)
        return ("graph replay" if capture is not None else "eager"), [base, b], value, looked
    except Exception as e:  # noqa: BLE001 - retried eagerly: a refused config fails there too
        if capture is None:
            raise
        sync(dev)
        b, value, looked = _step_in(setting, step, None)
        why = f"{type(e).__name__}: {str(e).splitlines()[0][:120]}"
        return f"eager ({what} failed to capture: {why})", [step.eager, b], value, looked


def _timed_pairs(runs: list, step: _PointStep, pairs: int, dev: torch.device) -> tuple[list[float], list[float]]:
    """`_setting_runs`' two runs from the point's starting positions in `pairs` interleaved rounds
    (`time_interleaved`); the list is emptied and the setting's graph and memory pool released before the next
    capture. -> (the step's ms, the setting's ms)."""
    a, b = runs
    runs.clear()
    step.reset()
    out = time_interleaved(a, b, step.advance, pairs, dev)
    del a, b
    if dev.type == "cuda":
        torch.cuda.empty_cache()
    return out


def _step_in(setting: Callable[[], Any], step: _PointStep, capture) -> tuple[Callable[[], None], Any, list]:
    """The step inside `setting()` (a context manager that changes which configs the lookups return), ready to
    time: with `capture`, a CUDA graph captured inside it (kernels look their configs up when launched, so the graph
    holds that setting's launches); without, an eager step run inside it each time, after one untimed run (a new
    config's kernels compile on their first launch). -> (run one step, what the setting yielded, the Resolutions of
    the lookups made while capturing or in that first run)."""
    with setting() as value, tuned_configs.record_resolutions() as looked:
        run = capture(step.eager) if capture is not None else None
        if run is None:
            step.eager()
    if run is None:
        def run():
            with setting():
                step.eager()
    return run, value, looked


def try_configs(step: _PointStep, base: Callable[[], None],
                capture: Callable[[Callable[[], None]], Callable[[], None]] | None, trials, pairs: int,
                dev: torch.device, control: dict | None = None) -> list[dict]:
    """--try: for each trial (kernelbench.decoder.trials.Trial), the step with the trial's pins and its settings
    (trials.settings_applied; `step.model`'s lanes made again from them) applied against the
    step as it runs (`base`: the point's graph replay or eager step), in `pairs` interleaved rounds on the same cache
    and inputs (`time_interleaved`), compared pair by pair (`paired_comparison`, delta = step - trial: + when the
    trial is faster). The trial's step is a graph captured inside its pins (`_step_in`); should the capture fail,
    both are timed eagerly (`method` says so); should the trial's config be refused by a kernel (or fail), the row
    says so and nothing is timed; a trial whose pins matched no lookup of the step (and that sets no setting) is
    reported, not timed. -> one row per trial: trial, pinned ({op: distinct keys its pins answered}), settings (the
    names of the STEP_SETTINGS it sets, when it sets any), and when timed method, step_ms (the
    step), trial_ms, paired_delta_ms, delta_q1_ms, delta_q3_ms, delta_ci_ms, pairs and verdict (faster / slower /
    within noise).

    `control`: the point's A/A trial (`control_trial`'s row: the step captured again with nothing changed, timed
    against the step in the same way), the first row; each trial's verdict is then "faster" or "slower" only when its
    interval also clears the control's move (`controlled_verdict`), its `raw_verdict` keeping the plain sign
    test's."""
    out = [control] if control and trials else []
    model = getattr(step, "model", None)     # a trial's settings make the decoder's lanes again (settings_applied)
    for trial in trials:
        @contextlib.contextmanager
        def setting(t=trial):
            with settings_applied(t.env, model), tuned_configs.pins_applied(t.pins):
                yield
        row = {"trial": trial.text, "pinned": {}, **({"settings": [n for n, _ in trial.env]} if trial.env else {})}
        try:
            method, runs, _, looked = _setting_runs(setting, step, base, capture, dev, "the trial's graph")
        except Exception as e:  # noqa: BLE001 - a config a kernel refuses is a finding of the trial, not a crash
            sync(dev)
            out.append({**row, "verdict": f"refused: {type(e).__name__}: {str(e).splitlines()[0][:160]}"})
            continue
        row["pinned"] = pinned_keys(looked)
        if not row["pinned"] and not trial.env:
            out.append({**row, "verdict": "matched no lookup of the step: nothing timed"})
            continue
        timed = {**row, **_timed_row(method, *_timed_pairs(runs, step, pairs, dev))}
        if control:
            timed.update(raw_verdict=timed["verdict"],
                         verdict=controlled_verdict(timed["verdict"], timed["delta_ci_ms"], control["delta_ci_ms"]))
        out.append(timed)
    return out


def _timed_row(method: str, base_ms: list[float], trial_ms: list[float]) -> dict:
    """A --try row's timing fields from the step's and the setting's paired times (`paired_comparison`, delta = step -
    trial): method, step_ms, trial_ms, the paired delta's median, quartiles and interval, pairs, and the sign test's
    verdict in --try's words (faster / slower / within noise)."""
    cmp = paired_comparison(trial_ms, base_ms)
    return {"method": method, "step_ms": cmp["step_ms"], "trial_ms": cmp["tuned_ms"],
            **{k: cmp[k] for k in ("paired_delta_ms", "delta_q1_ms", "delta_q3_ms", "delta_ci_ms", "pairs")},
            "verdict": {"helps": "faster", "hurts": "slower"}.get(cmp["verdict"], cmp["verdict"])}


CONTROL_TRIAL = "(control: the step as it runs, captured again)"
CONTROL_OVERLAP = "within noise (inside the control's A/A shift)"
CONTROL_CAPTION = ("a verdict needs its interval to clear the A/A control's move, of either sign (the step captured "
                   "again with nothing changed; the lines below)")


def control_trial(step: _PointStep, base: Callable[[], None],
                  capture: Callable[[Callable[[], None]], Callable[[], None]] | None, pairs: int,
                  dev: torch.device) -> dict:
    """The A/A trial of --try and --ablate-tuned: the step captured a second time with no config changed (its own
    graph and memory pool, as a trial's), timed against the step in `pairs` interleaved rounds like a trial. Its
    paired delta is what a trial's delta holds besides the trial's configs (on the H200, session 24 call 2: a trial
    pinning exactly the default config of mhc_post_pre_norm at one token came out -0.011 ms, interval -0.024 ..
    -0.003: "slower" by the plain sign test). -> a --try row with `control`: True, verdict "A/A: " + the sign
    test's verdict."""
    method, runs, _, _ = _setting_runs(contextlib.nullcontext, step, base, capture, dev, "the control's graph")
    row = _timed_row(method, *_timed_pairs(runs, step, pairs, dev))
    return {"trial": CONTROL_TRIAL, "control": True, "pinned": {}, **row, "verdict": "A/A: " + row["verdict"]}


def controlled_verdict(verdict: str, ci: list[float] | None, control_ci: list[float] | None,
                       names: tuple[str, str] = ("faster", "slower")) -> str:
    """A trial's verdict against the A/A control: a recapture moves the step by an amount of either sign (its memory
    pool and graph are new; the control measured one such move), so the control's floor is the largest move its
    interval admits, max(|lo|, |hi|). `names`: the verdicts of a delta above / below 0 ("faster" / "slower" for
    --try, "helps" / "hurts" for --ablate-tuned); such a verdict stands when the interval lies wholly above +floor
    (below -floor), else it becomes CONTROL_OVERLAP. Without a control interval (too few pairs) the verdict
    stands."""
    if verdict not in names or ci is None or control_ci is None:
        return verdict
    floor = max(abs(control_ci[0]), abs(control_ci[1]))
    if verdict == names[0] and ci[0] > floor:
        return verdict
    if verdict == names[1] and ci[1] < -floor:
        return verdict
    return CONTROL_OVERLAP


class _PointStep:
    """One point's decode step on its own cache and inputs: `eager()` runs it at the current positions, `advance()`
    moves every sequence one token on, `reset()` goes back to the starting contexts. The settings a point times (the
    tuned step and each ablation's) share it: the same cache, ids and positions."""

    def __init__(self, model: Transformer, c: int, lengths: list[int], cap: int, lo: int, hi: int, seed: int,
                 dev: torch.device):
        self.model = model
        self.cache = model.new_cache(c, cap)
        self.cache.fill_random(torch.Generator(device=dev).manual_seed(seed))
        gen = torch.Generator().manual_seed(seed + c)                      # the same ids on every rank
        self.ids = torch.randint(lo, hi, (c,), generator=gen).to(dev)
        self.base = torch.tensor(lengths, dtype=torch.long, device=dev)
        self.positions = self.base.clone()
        self.seq_ids = torch.arange(c, device=dev)

    def eager(self) -> None:
        _, h = self.model.decode(self.ids, self.positions, self.seq_ids, self.cache, check=False)
        if self.model.cfg.n_mtp_layers > 0:
            self.model.mtp_forward(h, self.ids, Step(self.ids, self.positions, self.seq_ids), self.cache)

    def advance(self) -> None:
        self.positions.add_(1)

    def reset(self) -> None:
        self.positions.copy_(self.base)


def _capture_graph(eager: Callable[[], None], dev: torch.device, tokens: int) -> Callable[[], None]:
    """`eager` (a step of `tokens` tokens) captured as a CUDA graph, after one run on a side stream (it warms that
    stream's allocator) -> the graph's replay (the graph lives as long as the returned callable)."""
    g = torch.cuda.CUDAGraph()
    s = new_stream(dev, "main", tokens)   # the capture stream: its kernels keep this batch's priority in the replay
    s.wait_stream(torch.cuda.current_stream(dev))
    with torch.cuda.stream(s):
        eager()
    torch.cuda.current_stream(dev).wait_stream(s)
    with torch.cuda.graph(g, stream=s):
        eager()
    return g.replay


def _graph_replay(model: Transformer, res: BenchResult, graph: str, step: _PointStep,
                  dev: torch.device) -> Callable[[], None] | None:
    """The point's step as a CUDA graph replay, or None (time eagerly) when res asks for no graph or the capture is
    not attempted or fails: res.graph_error says why."""
    if res.graph and graph == "auto" and model.ops.fallbacks and not res.graph_error:
        res.graph_error = (f"not attempted: reference fallbacks read tensors on the host "
                           f"({', '.join(sorted(model.ops.fallbacks))}); --graph on forces a try")
    if not res.graph or res.graph_error:
        return None
    try:
        return _capture_graph(step.eager, dev, step.ids.numel())
    except Exception as e:  # noqa: BLE001 - reported, then timed eagerly
        res.graph_error = f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"
        sync(dev)
        return None


def _step_bytes(model: Transformer, step: _PointStep) -> tuple[dict[str, float], list]:
    """One eager step with counting ops -> (bytes per op: the bandwidth roofline, the Resolutions of its config
    lookups)."""
    plain = model.env.ops
    rec = RecordingOps(plain)
    model.env.ops = rec
    try:
        with tuned_configs.record_resolutions() as looked:
            step.eager()
    finally:
        model.env.ops = plain
    return dict(rec.bytes), looked


def _ready_step(model: Transformer, res: BenchResult, c: int, lengths: list[int], cap: int, lo: int, hi: int,
                warmup: int, graph: str, seed: int, dev: torch.device):
    """A point's step built, its bytes counted (one eager step with counting ops, which also compiles), `warmup`
    eager steps run and its CUDA graph captured (`_graph_replay`) -> (step, bytes per op, config lookups, replay or
    None)."""
    step = _PointStep(model, c, lengths, cap, lo, hi, seed, dev)
    op_bytes, looked = _step_bytes(model, step)
    for _ in range(warmup):
        step.eager()
        step.advance()
    return step, op_bytes, looked, _graph_replay(model, res, graph, step, dev)


def _run_point(model: Transformer, res: BenchResult, c: int, lengths: list[int], cap: int, lo: int, hi: int,
               steps: int, warmup: int, graph: str, seed: int, dev: torch.device, ablate: bool = False,
               trials=(), try_control: bool = True) -> BenchPoint:
    step, op_bytes, looked, replay = _ready_step(model, res, c, lengths, cap, lo, hi, warmup, graph, seed, dev)
    nbytes = sum(op_bytes.values())
    step.reset()
    times = _time_steps(replay or step.eager, step.advance, steps, dev)
    p10, p90, q1, q3 = _quantiles(times)
    med = statistics.median(times)
    pt = BenchPoint(c, statistics.fmean(lengths), med, p10, p90, q1, q3, 1e3 * c / med, bytes=nbytes,
                    samples_ms=[round(t, 4) for t in times],
                    configs=[r.as_json() for r in tuned_configs.summarize(looked)])
    if not math.isnan(res.gbps):
        pt.roofline_ms = nbytes / (res.gbps * 1e9) * 1e3
    capture = None if replay is None else (lambda eager: _capture_graph(eager, dev, c))
    tuned_here = any(c["source"] in tuned_configs.TUNED_SOURCES for c in pt.configs)
    if try_control and (trials or (ablate and tuned_here)):
        pt.control = control_trial(step, replay or step.eager, capture, steps, dev)
    if ablate:
        pt.ablation = ablate_tuned(pt, step, replay or step.eager, capture, steps, dev, control=pt.control)
    if trials:
        pt.trials = try_configs(step, replay or step.eager, capture, trials, steps, dev, control=pt.control)
    return pt


# a PDL launch starts before its predecessor ends and parks in its wait: its recorded span includes that wait
PDL_NOTE = ("PDL at this C (KERNELBENCH_PDL): each kernel's span starts at its early launch and includes its wait, so "
            "op rows overlap (the overlap is in the beside-other-kernels row); KERNELBENCH_PDL=0 gives per-op times "
            "without it")


# above PDL_MAX_TOKENS only the MoE's W1 / W3 launch may start early (kernels/moe.py config UP_EARLY)
EARLY_NOTE = ("the MoE's W1 / W3 launch starts beside its routing launch (config UP_EARLY): its span includes its "
              "wait, so the MoE rows overlap each other and the side lane's (the overlap is in the beside-other-"
              "kernels row); pin UP_EARLY \"off\" (--try) for per-op times without it")


def moe_starts_early(configs: list[dict], dev: torch.device) -> bool:
    """Whether a point's looked-up configs (BenchPoint.configs) start the MoE's W1 / W3 launch early on `dev`."""
    from kernelbench.kernels.moe import up_early
    return any(c["op"] in ("moe_routed", "moe_layer", "moe_experts") and up_early(c.get("config"), dev)
               for c in configs)


def _profile_point(model: Transformer, res: BenchResult, pt: BenchPoint, lengths: list[int], cap: int, lo: int,
                   hi: int, warmup: int, graph: str, seed: int, dev: torch.device) -> None:
    """The per-op attribution of a timed point: the same step (cache, ids, positions) rebuilt, warmed and captured
    again, then profiled (profile_step); its rows are scaled to the point's timed step."""
    step, op_bytes, _, replay = _ready_step(model, res, pt.batch, lengths, cap, lo, hi, warmup, graph, seed, dev)
    rows, pt.attribution_source, pt.attribution_note, kps, pt.lanes = profile_step(model, step.eager, replay,
                                                                                   step.reset, dev, pt.step_ms, op_bytes)
    if dev.type == "cuda" and pdl_on(dev, pt.batch):
        pt.attribution_note = "; ".join(filter(None, [pt.attribution_note, PDL_NOTE]))
    elif dev.type == "cuda" and moe_starts_early(pt.configs, dev):
        pt.attribution_note = "; ".join(filter(None, [pt.attribution_note, EARLY_NOTE]))
    pt.attribution = [r.as_json() for r in rows]
    pt.kernels_per_step = kps
    pt.kernels_per_layer = kps / max(1, res.layers)


def _analyse(res: BenchResult) -> None:
    """Fit step = a + b*C with its confidence interval; with a roofline, raise scaling.py's flags on
    both axes (time growing faster than the bytes the step must move)."""
    for axis, pts in (("batch", res.points), ("context", res.context_points)):
        xs = [float(p.batch if axis == "batch" else p.context) for p in pts]
        if len(set(xs)) < 2:
            continue
        roof = all(not math.isnan(p.roofline_ms) for p in pts)
        sw = sc.Sweep("decode_step", res.impl, axis, "C" if axis == "batch" else "context", [
            sc.Point(x, {}, p.step_ms * 1e3, p.q1_ms * 1e3, p.q3_ms * 1e3,
                     max(sc.LAUNCH_US, p.roofline_ms * 1e3) if roof else p.step_ms * 1e3)
            for x, p in zip(xs, pts)])
        sc.analyse(sw)
        if roof:
            res.flags += sw.flags
        if axis == "batch":
            f = sw.fit
            res.fixed_ms, res.per_request_ms, res.fit_r2 = f.a / 1e3, f.b / 1e3, f.r2
            res.fixed_ci_ms, res.per_request_ci_ms = f.a_ci / 1e3, f.b_ci / 1e3


MOE_OPS = ("moe_gate", "moe_experts", "moe_layer", "moe_routed", "shared_expert")   # an MoE layer's ops


def rest_per_layer(pt: BenchPoint, layers: int) -> tuple[float, float] | None:
    """Issue 17's measure from a point's attribution: (the MoE ops' GPU us per layer, the rest of the step per layer
    in us: (step - the MoE ops' GPU time) / layers), or None without an attribution. From 8 tokens the MoE's shared
    expert runs on a side stream of its own beside its routed launches, so the MoE's GPU time there exceeds its part
    of the step and the rest is understated."""
    if not pt.attribution or layers <= 0:
        return None
    moe_ms = sum(r["gpu_ms"] for r in pt.attribution if r["op"] in MOE_OPS)
    return 1e3 * moe_ms / layers, 1e3 * (pt.step_ms - moe_ms) / layers


def op_rows_busy(attribution: list[dict]) -> float:
    """GPU ms per step that some kernel ran, from attribution rows (dicts): the op rows less OVERLAP."""
    ops = sum(r["gpu_ms"] for r in attribution if r["op"] not in NOT_OPS)
    return ops - sum(r["gpu_ms"] for r in attribution if r["op"] == OVERLAP)


def as_json(res: BenchResult) -> dict:
    return asdict(res)


# ------------------------------------------------------------------------------------------------
# output: the terminal tables and the database rows
# ------------------------------------------------------------------------------------------------
def attribution_check(pt: BenchPoint) -> tuple[float, float]:
    """-> (GPU ms some kernel ran: the op rows' sum less OVERLAP, that / the measured step) at one point."""
    busy = op_rows_busy(pt.attribution)
    return busy, busy / pt.step_ms if pt.step_ms else math.nan


def print_result(res: BenchResult, console, kernels: bool = False) -> None:
    from rich.table import Table
    tp = (f"TP{res.tp}" + (" (rank-0 shapes, collectives skipped)" if res.simulated_tp else "")
          + (", shared expert split over the ranks" if res.shared_split else "")
          + (f", high stream priority: {res.stream_priority}" if res.stream_priority != "off" else "")
          + (f", KV compressor on its own lane ({res.kv_lane})" if res.kv_lane != "off" else "")
          + (f", Hadamard: {res.hadamard}" if res.hadamard != HADAMARD_DEFAULT else "")
          + (f", fp8 dots promoted every {res.fp8_promote} products" if res.fp8_promote else "")
          + (f", indexer keys {res.key_cache} (KERNELBENCH_KEY_CACHE)" if res.key_cache != "bf16" else ""))
    use = "".join(f", {k}={v}" for k, v in res.overrides.items())
    graph = "yes" if res.graph and not res.graph_error else "no"
    fit_ok = not math.isnan(res.per_request_ms)
    t = Table(title=f"decode step: {res.config} ({res.layers} layers), {res.impl}{use}, {res.device}, {tp}, "
                    f"context {res.context}, CUDA graph {graph}"
                    + (f", side stream: {res.overlap}" if res.device.startswith("cuda") else ""))
    for col in ("sweep", "C", "mean ctx", "step ms", "p10", "p90", "tokens/s", "roofline ms", "% of roofline",
                "fit a+bC ms", "op rows ms"):
        t.add_column(col, justify="right")
    for sweep, pts in (("C", res.points), ("context", res.context_points)):
        for p in pts:
            roof = "" if math.isnan(p.roofline_ms) else f"{p.roofline_ms:.3f}"
            pct = "" if math.isnan(p.roofline_ms) else f"{100 * p.roofline_ms / p.step_ms:.0f}%"
            fit = f"{res.fixed_ms + res.per_request_ms * p.batch:.2f}" if fit_ok and sweep == "C" else ""
            busy = f"{attribution_check(p)[0]:.3f}" if p.attribution else ""
            t.add_row(sweep, str(p.batch), f"{p.context:.0f}", f"{p.step_ms:.3f}", f"{p.p10_ms:.3f}",
                      f"{p.p90_ms:.3f}", f"{p.tokens_per_s:.1f}", roof, pct, fit, busy)
    console.print(t)
    if fit_ok:
        ci = lambda v: "" if math.isnan(v) else f" ± {v:.3g}"  # noqa: E731
        console.print(f"fit: step = {res.fixed_ms:.3f}{ci(res.fixed_ci_ms)} ms + {res.per_request_ms:.4f}"
                      f"{ci(res.per_request_ci_ms)} ms x C (95% CI, r2 {res.fit_r2:.3f}; the users' anchor before "
                      f"the fix: 40 ms + 31 ms x N)")
        if res.per_request_ms > 0:
            console.print(f"throughput ceiling from per-request cost: {1e3 / res.per_request_ms:.3g} tokens/s")
    for f in res.flags:
        console.print(f"[yellow]flag:[/] {f}", markup=True, highlight=False)
    if res.graph_error:
        console.print(f"[yellow]CUDA graph capture failed, timed eagerly:[/] {res.graph_error}")
    if res.fallbacks:
        console.print(f"[yellow]ops without a {res.impl} kernel ran their reference:[/] {', '.join(res.fallbacks)}")
    for p in res.points + res.context_points:
        if p.attribution:
            busy, frac = attribution_check(p)
            console.print(f"C={p.batch} ctx {p.context:.0f}: op rows sum to {busy:.3f} ms of the {p.step_ms:.3f} ms "
                          f"step "
                          f"({100 * frac:.0f}%, {p.attribution_source}); {p.kernels_per_step:.0f} kernels per step, "
                          f"{p.kernels_per_layer:.1f} per layer"
                          + (f"; {p.attribution_note}" if p.attribution_note else ""))
            split = rest_per_layer(p, res.layers)
            if split is not None:
                console.print(f"C={p.batch} ctx {p.context:.0f}: per layer, the MoE ops' kernels {split[0]:.1f} us, "
                              f"the rest of the step {split[1]:.1f} us ((step - MoE kernels) / {res.layers} layers)")
            if p.lanes:
                ln = p.lanes
                console.print(f"C={p.batch} ctx {p.context:.0f}: main lane busy {ln['main_ms']:.3f} ms, "
                              f"{ln['streams'] - 1} other lane(s) {ln['side_ms']:.3f} ms, of which "
                              f"{ln['side_alone_ms']:.3f} ms with no main-lane kernel running (side work the step "
                              f"waited for)")
                if ln.get("side_alone_by_op_ms"):
                    by_op = ", ".join(f"{op} {ms * 1e3:.1f} us" for op, ms in ln["side_alone_by_op_ms"].items())
                    console.print(f"C={p.batch} ctx {p.context:.0f}: side work alone by op (each side kernel's time "
                                  f"outside the main lane's spans; side kernels may overlap each other): {by_op}")
    profiled = [p for p in res.points if p.attribution]
    if profiled:
        p = max(profiled, key=lambda q: q.batch)
        console.print(attribution_table(p, res.gbps))
    if kernels:
        for p in profiled:
            console.print(kernel_table(p))
    print_configs(res.points, console)
    print_unused(res, console)
    print_ablation(res.points, console)
    print_trials(res.points, console, ABLATION_CONFIDENCE, ABLATION_MIN_PAIRS)


def kernel_table(p: BenchPoint):
    """--kernels: every op row's kernels at one point, by their place in the op's calls (the up and the down launch
    of one grouped GEMM kernel are two rows), with the time per launch."""
    from rich.table import Table
    t = Table(title=f"kernels per op at C={p.batch} ({p.attribution_source}), per step")
    for col in ("op", "slot", "kernel", "per step", "us each", "GPU ms", "share"):
        t.add_column(col, justify="left" if col in ("op", "kernel") else "right")
    for r in p.attribution:
        for k in r.get("by_kernel", ()):
            each = 1e3 * k["gpu_ms"] / k["count"] if k["count"] else math.nan
            t.add_row(r["op"], str(k["slot"]), k["name"][:60], f"{k['count']:g}", f"{each:.2f}", f"{k['gpu_ms']:.3f}",
                      f"{100 * k['gpu_ms'] / p.step_ms:.1f}%")
    return t


def print_ablation(points: list[BenchPoint], console) -> None:
    """--ablate-tuned's table: per C and op, the tuned and the ablated step's medians and the paired differences."""
    from rich.table import Table
    rows = [(p, a) for p in points for a in p.ablation]
    if not rows:
        return
    t = Table(title="the step without each op's tuned entries (that op on its defaults; --ablate-tuned): paired and "
                    "interleaved, the tuned and the ablated step alternate A B B A on the same cache and inputs",
              caption=f"delta = ablated - tuned, per pair (a drift shared by a pair cancels); verdict from the "
                      f"{ABLATION_CONFIDENCE:.0%} sign-test interval of the median delta: helps (above 0: the tuned "
                      f"entries make the step faster), hurts (below 0), else within noise; none under "
                      f"{ABLATION_MIN_PAIRS} pairs"
                      + ("; " + CONTROL_CAPTION if any(p.control for p in points) else ""))
    for col in ("C", "op", "entries removed", "pairs", "tuned ms", "ablated ms", "paired delta ms",
                "delta IQR ms", f"delta {ABLATION_CONFIDENCE:.0%} CI ms", "verdict"):
        t.add_column(col, justify="left" if col in ("op", "verdict") else "right")
    for p, a in rows:
        t.add_row(str(p.batch), a["op"], str(a["entries_removed"]), str(a["pairs"]), f"{a['tuned_ms']:.3f}",
                  f"{a['step_ms']:.3f}", *paired_cells(a))
    console.print(t)
    for p in points:
        if p.control and p.ablation:
            console.print(control_line(p.batch, p.control))


def control_line(c: int, control: dict) -> str:
    """One line on the A/A control of a C: its paired delta, interval and verdict."""
    ci = control["delta_ci_ms"]
    return (f"C={c}: A/A control (the step captured again, nothing changed): paired delta "
            f"{control['paired_delta_ms']:+.3f} ms, interval " + ("none" if ci is None else f"{ci[0]:+.3f} .. "
            f"{ci[1]:+.3f}") + f" ms ({control['verdict']})")


def _key_text(key: dict) -> str:
    return " ".join(f"{k}={v}" for k, v in key.items())


def print_configs(points: list[BenchPoint], console) -> None:
    """Which configs the step's kernels ran: a line per C (how many lookups were tuned at their key, borrowed or
    the kernel's default) and a row per lookup that was not tuned at its key on this device."""
    from rich.table import Table
    if not any(p.configs for p in points):
        return
    for p in points:
        n = Counter(c["source"] for c in p.configs)
        console.print(f"C={p.batch}: {len(p.configs)} kernel configs looked up: "
                      + ", ".join(f"{n[s]} {s}" for s in tuned_configs.SOURCES if n[s]))
    rows = [(p, c) for p in points for c in p.configs if c["source"] not in ("exact", "pinned")]
    if not rows:
        return
    t = Table(title="configs not tuned at the key the step asked for (kernelbench tune OP fills them)")
    for col in ("C", "op", "key", "source", "borrowed from", "tuned us"):
        t.add_column(col, justify="left" if col in ("op", "key", "source", "borrowed from") else "right")
    for p, c in rows:
        src = "" if c["tuned_key"] is None else f"{_key_text(c['tuned_key'])} on {c['tuned_device']}"
        t.add_row(str(p.batch), c["op"], _key_text(c["key"]), c["source"], src,
                  "" if c["tuned_us"] is None else f"{c['tuned_us']:.2f}")
    console.print(t)
    commands = tune_commands(c for _, c in rows)
    if commands:
        console.print("the keys above that are cases of flash-tp8, each tuned alone (then time the step with and "
                      "without the entries: --ablate-tuned):\n" + "\n".join(f"  {c}" for c in commands))


def print_unused(res: BenchResult, console) -> None:
    """One line: how many of this device's tuned entries no lookup of the run used, by op (the JSON's
    unused_entries lists them)."""
    if not res.unused_entries:
        return
    by_op = Counter(e["op"] for e in res.unused_entries)
    mine = sum(e.get("device") == tuned_configs.current_device() for e in tuned_configs.entries())
    console.print(f"{len(res.unused_entries)} of the {mine} tuned entries for this device answered no lookup of this "
                  f"run (other shapes, ops the step no longer calls; unused_entries in the JSON): "
                  + ", ".join(f"{op} {n}" for op, n in sorted(by_op.items())))


def tune_commands(configs, shape_set: str = "flash-tp8") -> list[str]:
    """`kernelbench tune OP --where ...` for the looked-up keys that name exactly a case of `shape_set` (every key
    field a case param with that value) that `kernelbench tune` would run (tune_work: an op with a tuning space);
    keys that differ only in the batch are one command (--where M=1,16,64). Keys whose fields are not case params (a
    derived size, e.g. sparse attention's Ksel) are left out, not guessed."""
    from kernelbench import registry
    from kernelbench.harness.bench import describe_where
    from kernelbench.harness.tune import tune_work
    groups: dict[tuple, set] = {}
    for c in configs:
        where = {k: frozenset({str(v)}) for k, v in c["key"].items()}
        try:
            work = tune_work((c["op"],), (), (shape_set,), (), (), where)
        except registry.RegistryError:
            continue
        if not any(cases for _, _, cases in work):
            continue
        batch = registry.get_op(c["op"]).batch_key
        batch = batch if batch in c["key"] else None
        rest = tuple((k, v) for k, v in where.items() if k != batch)
        groups.setdefault((c["op"], batch, rest), set()).update(where.get(batch, ()))
    return [f"kernelbench tune {op} --shapes {shape_set} "
            + describe_where({**({batch: frozenset(values)} if batch else {}), **dict(rest)})
            for (op, batch, rest), values in groups.items()]


def attribution_table(p: BenchPoint, gbps: float):
    from rich.table import Table
    where = "GPU" if p.attribution_source != "host time" else "host"
    t = Table(title=f"time per op at C={p.batch} ({p.attribution_source}), per step")
    for col in ("op", "calls", "kernels", f"{where} ms", "share", "MB", "GB/s", "% of copy BW"):
        t.add_column(col, justify="right" if col != "op" else "left")
    for r in p.attribution:
        ms, mb = r["gpu_ms"], r["bytes"] / 1e6
        rate = r["bytes"] / (ms * 1e-3) / 1e9 if ms > 0 and r["bytes"] else math.nan
        k = r.get("kernels", 0.0)
        t.add_row(r["op"], f"{r['calls']:g}", f"{k:g}" if k else "", f"{ms:.3f}", f"{100 * ms / p.step_ms:.1f}%", f"{mb:.2f}" if mb else "",
                  "" if math.isnan(rate) else f"{rate:.0f}",
                  "" if math.isnan(rate) or math.isnan(gbps) else f"{100 * rate / gbps:.0f}%")
    return t


def ceiling_gbps(device: str, store) -> float | None:
    """The copy bandwidth for the roofline: calibrated on this machine, else the datasheet's."""
    if not device.startswith("cuda"):
        return None
    from kernelbench.harness import calibrate, roofline
    name = torch.cuda.get_device_name(torch.device(device))
    try:
        cal = calibrate.load_ceilings(store, gpu_name=name) if store is not None else None
        return roofline.ceilings_for(name, cal).gbps
    except Exception:  # noqa: BLE001 - no ceiling known: the roofline columns stay empty
        return None


DECODE_OP = "decode_step"      # the database's op name for whole-step results (kernelbench report reads them)


def store_result(store, env_id: int, res: BenchResult, run_tag: str, git: str) -> int:
    """One bench_result row per point, under the op "decode_step" and implementation res.impl (with
    its --use overrides in the name); params say which model, C and context. -> rows written."""
    name = res.impl + "".join(f"+{k}={v}" for k, v in sorted(res.overrides.items())) + (
        "" if res.overlap == ",".join(SITES) or not res.device.startswith("cuda") else f"+overlap={res.overlap}")
    impl_id = store.op_impl_id(DECODE_OP, name, (git or "unknown")[:16], family="model", backend="model")
    rows = []
    for axis, pts in (("batch", res.points), ("context", res.context_points)):
        for p in pts:
            params = {"config": res.config, "layers": res.layers, "tp": res.tp, "C": p.batch,
                      "context": res.context if axis == "batch" else round(p.context), "axis": axis}
            extra = {"tokens_per_s": p.tokens_per_s, "roofline_ms": None if math.isnan(p.roofline_ms)
                     else p.roofline_ms, "p10_ms": p.p10_ms, "p90_ms": p.p90_ms, "mean_context": p.context,
                     "attribution": p.attribution, "attribution_source": p.attribution_source,
                     "lanes": p.lanes, "kernels_per_step": p.kernels_per_step, "graph": res.graph and not res.graph_error,
                     "graph_error": res.graph_error, "fallbacks": res.fallbacks, "device": res.device,
                     "simulated_tp": res.simulated_tp, "shared_split": res.shared_split,
                     "stream_priority": res.stream_priority, "kv_lane": res.kv_lane, "hadamard": res.hadamard,
                     "fp8_promote": res.fp8_promote, "key_cache": res.key_cache,
                     "fit": {"a_ms": _num(res.fixed_ms),
                     "b_ms": _num(res.per_request_ms), "a_ci_ms": _num(res.fixed_ci_ms),
                     "b_ci_ms": _num(res.per_request_ci_ms), "r2": _num(res.fit_r2)}, "flags": res.flags,
                     "configs": p.configs, "ablation": p.ablation, "trials": p.trials,
                     "control": p.control}
            rows.append(dict(
                environment_id=env_id, implementation_id=impl_id,
                shape_label=f"C={p.batch},ctx={params['context']}",
                params=params, config={"overrides": res.overrides} if res.overrides else {},
                method="graph" if res.graph and not res.graph_error else "eager", median_us=p.step_ms * 1e3,
                q1_us=p.q1_ms * 1e3, q3_us=p.q3_ms * 1e3, n=len(p.samples_ms), samples=p.samples_ms,
                bytes=p.bytes, gbps=p.bytes / (p.step_ms * 1e-3) / 1e9 if p.step_ms else None,
                fraction_of_ceiling=None if math.isnan(p.roofline_ms) else p.roofline_ms / p.step_ms,
                git_commit=git, run_tag=run_tag, extra=extra))
    return store.add_bench_results(rows)


def _num(v: float):
    return None if v is None or math.isnan(v) else v
