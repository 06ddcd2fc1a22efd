"""Timing that holds up: CUDA-graph replay over rotating inputs, or CUDA events with an L2 flush.

Method (docs/perf/README.md says why):
- graph (default): one CUDA graph of >= 32 back-to-back launches cycling over `sets` distinct input
  sets, sized so that sets x bytes >= 3 x L2 (capped by `max_sets` and a memory budget; `l2_cold`
  records whether the cap bit). A sample is one replay's time / launches. Launch gaps and host
  latency stay out; compilation happens in the warm-up call before capture.
- events: CUDA events around each eager call, an L2 flush (a write of >= 2 x L2 bytes) before each
  call, outside the timed region. Includes the Python wrapper's launch latency.
Repetition is adaptive: batches of samples until the relative standard error of the mean is under
`target_rse` (and at least `min_samples`), or `max_time_s` is spent. Reported: median, quartiles,
raw samples, SM clock (NVML or nvidia-smi) around the run. `check_roofline` flags a result faster
than the hardware could be (datasheet peaks): a measurement error (warm L2, a kernel that did no
work), never a win.

The core (`adaptive`, `summarize`) takes any sampling function, so tests drive it without a GPU.
"""
from __future__ import annotations

import math
import shutil
import statistics
import subprocess
import time
from dataclasses import asdict, dataclass, field
from typing import Callable, Sequence

import torch

GRAPH_MIN_LAUNCHES = 32
L2_ROTATE_FACTOR = 3      # rotating input sets cover >= 3 x L2
DISTINCT_DRAWS = 4        # fresh random draws among them (make_sets); the rest are copies at new addresses
L2_FLUSH_FACTOR = 2       # the events-mode flush writes >= 2 x L2


class NoGPUError(RuntimeError):
    """Raised when a timing function needs CUDA and there is none."""


def require_cuda() -> torch.device:
    if not torch.cuda.is_available():
        raise NoGPUError("no CUDA GPU is visible: timing needs one (bench, calibrate and tune run on the GPU "
                         "machine; on a CPU use `kernelbench verify` or the tuner's --interpret mode)")
    return torch.device("cuda", torch.cuda.current_device())


@dataclass
class Summary:
    median_us: float
    q1_us: float
    q3_us: float
    mean_us: float
    rel_stderr: float
    n: int
    samples: list[float] = field(repr=False)

    @property
    def iqr_us(self) -> float:
        return self.q3_us - self.q1_us

    def as_dict(self) -> dict:
        return asdict(self)


def sync(device: str | torch.device) -> None:
    """Wait for the GPU's queued work when `device` is a CUDA device (its own index, else the current one);
    nothing on a CPU."""
    device = torch.device(device)
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def quantile(sorted_xs: Sequence[float], q: float) -> float:
    """Linear-interpolated quantile of already sorted values."""
    if not sorted_xs:
        raise ValueError("no samples")
    pos = (len(sorted_xs) - 1) * q
    lo, hi = math.floor(pos), math.ceil(pos)
    return sorted_xs[lo] + (sorted_xs[hi] - sorted_xs[lo]) * (pos - lo)


def summarize(samples: Sequence[float]) -> Summary:
    xs = sorted(float(s) for s in samples)
    if not xs:
        raise ValueError("no samples to summarize")
    mean = statistics.fmean(xs)
    sd = statistics.stdev(xs) if len(xs) > 1 else 0.0
    rse = sd / math.sqrt(len(xs)) / mean if mean > 0 else math.inf
    return Summary(median_us=quantile(xs, 0.5), q1_us=quantile(xs, 0.25), q3_us=quantile(xs, 0.75),
                   mean_us=mean, rel_stderr=rse, n=len(xs), samples=list(samples))


def adaptive(sample_batch: Callable[[int], list[float]], *, target_rse: float = 0.01, min_samples: int = 10,
             max_samples: int = 2000, max_time_s: float = 2.0, batch: int = 10,
             clock: Callable[[], float] = time.perf_counter) -> Summary:
    """Call `sample_batch(k)` (returns k times in us) until the relative standard error of the mean
    is under `target_rse` with at least `min_samples`, or `max_samples` / `max_time_s` is reached."""
    samples: list[float] = []
    start = clock()
    while True:
        samples.extend(sample_batch(batch))
        if len(samples) >= min_samples:
            s = summarize(samples)
            if s.rel_stderr <= target_rse or len(samples) >= max_samples or clock() - start >= max_time_s:
                return s
        elif clock() - start >= max_time_s * 4:   # a pathological slow kernel: stop at any count
            return summarize(samples)


# --- clocks -------------------------------------------------------------------------------------

def sm_clock_mhz(index: int | None = None) -> float | None:
    """The current SM clock via NVML (pynvml) or nvidia-smi; None when neither is there."""
    if index is None:
        index = torch.cuda.current_device() if torch.cuda.is_available() else 0
    try:
        import pynvml  # type: ignore
        pynvml.nvmlInit()
        h = pynvml.nvmlDeviceGetHandleByIndex(index)
        return float(pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM))
    except Exception:  # noqa: BLE001 - NVML missing or not permitted: try the CLI
        pass
    exe = shutil.which("nvidia-smi")
    if not exe:
        return None
    try:
        out = subprocess.run([exe, "--query-gpu=clocks.sm", "--format=csv,noheader,nounits", "-i", str(index)],
                             capture_output=True, text=True, timeout=10)
        return float(out.stdout.strip().splitlines()[0])
    except (subprocess.SubprocessError, ValueError, IndexError, OSError):
        return None


# --- the two GPU methods ------------------------------------------------------------------------

def l2_bytes(device: torch.device | None = None) -> int:
    device = device or require_cuda()
    return int(getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 50 * 2 ** 20))


class L2Flusher:
    """A buffer of >= 2 x L2 bytes; `flush()` writes all of it, evicting everything cached."""

    def __init__(self, device: torch.device | None = None, factor: int = L2_FLUSH_FACTOR):
        device = device or require_cuda()
        self.nbytes = max(factor * l2_bytes(device), 256 * 2 ** 20)
        self.buf = torch.empty(self.nbytes // 4, dtype=torch.int32, device=device)

    def flush(self) -> None:
        self.buf.zero_()


def time_events(calls: Sequence[Callable[[], object]], *, flush: bool = True, **adaptive_kw) -> Summary:
    """Events around each eager call (cycling over `calls`, one per input set), L2 flushed before each."""
    require_cuda()
    flusher = L2Flusher() if flush else None
    state = {"i": 0}

    def batch(k: int) -> list[float]:
        pairs = []
        for _ in range(k):
            if flusher:
                flusher.flush()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            calls[state["i"] % len(calls)]()
            end.record()
            state["i"] += 1
            pairs.append((start, end))
        torch.cuda.synchronize()
        return [s.elapsed_time(e) * 1e3 for s, e in pairs]

    return adaptive(batch, **adaptive_kw)


def capture_graph(calls: Sequence[Callable[[], object]], launches: int) -> tuple[torch.cuda.CUDAGraph, list]:
    """One graph of `launches` calls cycling over `calls`; returns it and each call's last output."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):     # allocator warm-up off the default stream, as torch advises
        for c in calls:
            c()
    torch.cuda.current_stream().wait_stream(stream)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    outs: list = [None] * len(calls)
    with torch.cuda.graph(graph):
        for i in range(launches):
            outs[i % len(calls)] = calls[i % len(calls)]()
    torch.cuda.synchronize()
    return graph, outs


def time_graph(calls: Sequence[Callable[[], object]], *, launches: int | None = None,
               **adaptive_kw) -> tuple[Summary, list, int]:
    """Replays of one graph of back-to-back launches; a sample is replay time / launches. Returns
    the summary, each call's output tensors (holding the last replay's results) and the launch count."""
    require_cuda()
    launches = launches or max(GRAPH_MIN_LAUNCHES, len(calls))
    graph, outs = capture_graph(calls, launches)
    return time_replays(graph, launches, **adaptive_kw), outs, launches


def time_replays(graph: torch.cuda.CUDAGraph, launches: int, **adaptive_kw) -> Summary:
    """Replays of a captured graph of `launches` launches (one untimed first); a sample is replay time / launches."""
    graph.replay()      # one untimed replay
    torch.cuda.synchronize()

    def batch(k: int) -> list[float]:
        pairs = []
        for _ in range(k):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            graph.replay()
            end.record()
            pairs.append((start, end))
        torch.cuda.synchronize()
        return [s.elapsed_time(e) * 1e3 / launches for s, e in pairs]

    return adaptive(batch, **adaptive_kw)


# --- sanity against the hardware ----------------------------------------------------------------

def roofline_floor_us(flops: float, nbytes: float, peak_tflops: float, peak_gbps: float) -> float:
    """The least time any kernel needs: bytes at peak bandwidth or FLOPs at peak rate."""
    t_mem = nbytes / (peak_gbps * 1e9) if peak_gbps else 0.0
    t_math = flops / (peak_tflops * 1e12) if peak_tflops else 0.0
    return max(t_mem, t_math) * 1e6


def check_roofline(median_us: float, flops: float, nbytes: float, peak_tflops: float, peak_gbps: float,
                   slack: float = 0.05) -> str | None:
    """A message when the time beats the hardware's floor by more than `slack`, else None."""
    floor = roofline_floor_us(flops, nbytes, peak_tflops, peak_gbps)
    if floor > 0 and median_us < floor * (1 - slack):
        return (f"MEASUREMENT ERROR: {median_us:.3g} us is under the roofline floor {floor:.3g} us "
                f"({nbytes / median_us / 1e3:.0f} GB/s, {flops / median_us / 1e6:.1f} TFLOP/s against peaks "
                f"{peak_gbps:.0f} GB/s, {peak_tflops:.0f} TFLOP/s): warm cache, skipped work or a broken timer")
    return None


# --- one implementation of one op at one shape --------------------------------------------------

@dataclass
class Measurement:
    op: str
    impl: str
    params: dict
    label: str
    config: dict
    method: str
    summary: Summary
    flops: float
    bytes: float
    sets: int
    rotated_bytes: int
    l2_cold: bool
    launches: int
    sm_clock_mhz: float | None
    verified: bool
    verify_detail: str
    roofline_error: str | None
    notes: list[str] = field(default_factory=list)

    @property
    def gbps(self) -> float:
        return self.bytes / self.summary.median_us / 1e3

    @property
    def tflops(self) -> float:
        return self.flops / self.summary.median_us / 1e6

    @property
    def ok(self) -> bool:
        return self.verified and self.roofline_error is None


def tensor_bytes(inputs: dict) -> int:
    return sum(v.numel() * v.element_size() for v in inputs.values() if isinstance(v, torch.Tensor))


def make_sets(spec, params: dict, device, seed: int, l2: int, *, max_sets: int = 256,
              budget_bytes: float = 8e9, distinct: int = DISTINCT_DRAWS) -> tuple[list[dict], int, bool]:
    """Input sets whose total covers >= 3 x L2 where the caps allow. The first `distinct` are fresh
    random draws (never zeros); the rest are device copies of those at new addresses: what keeps the
    L2 cold is the addresses, and drawing hundreds of real-size sets on the CPU would cost minutes."""
    gen = torch.Generator().manual_seed(seed)
    first = spec.make_inputs(params, gen, device, "normal")
    per = max(1, tensor_bytes(first))
    want = math.ceil(L2_ROTATE_FACTOR * l2 / per)
    n = max(1, min(want, max_sets, int(budget_bytes // per)))
    sets = [first] + [spec.make_inputs(params, gen, device, "normal") for _ in range(min(n, distinct) - 1)]
    sets += [clone(sets[i % len(sets)]) for i in range(n - len(sets))]
    return sets, n * per, n * per >= L2_ROTATE_FACTOR * l2


def draws_of(sets: list[dict], distinct: int = DISTINCT_DRAWS) -> tuple[list[dict], list[int]]:
    """The fresh draws of a make_sets rotation and how many of its sets each one is: set i is a copy of draw
    i % d (d = min(len(sets), distinct))."""
    d = min(len(sets), distinct)
    return sets[:d], [len(sets) // d + (i < len(sets) % d) for i in range(d)]


def as_outputs(spec, result, inputs: dict) -> dict:
    outs = result if isinstance(result, tuple) else (result,)
    named = dict(zip(spec.outputs, outs))
    for name in spec.inplace:
        named[name] = inputs[name]
    return named


def recheck(spec, params: dict, impl_outs: dict, inputs: dict) -> tuple[bool, str]:
    """Compare an implementation's outputs with the reference on the same inputs."""
    from kernelbench.harness.testing import error_stats, passes
    ref_inputs = clone(inputs)
    ref = as_outputs(spec, spec.reference(**ref_inputs), ref_inputs)
    tols = spec.tolerance(params)
    bad = []
    for name, tol in tols.items():
        if name not in impl_outs or name not in ref:
            continue
        st = error_stats(impl_outs[name], ref[name], tol)
        if not passes(st, tol):
            bad.append(f"{name}: {st.mismatches}/{st.numel} mismatches, rel_fro {st.rel_fro:.3g}")
    return (not bad), "; ".join(bad) or "matches the reference"


def measure_impl(spec, impl, params: dict, *, config: dict | None = None, method: str = "graph",
                 seed: int = 0, max_sets: int = 256, peaks: tuple[float, float] | None = None,
                 **adaptive_kw) -> Measurement:
    """Time `impl` on `params` (fresh rotating inputs), recheck the timed outputs against the
    reference, and flag a time under the roofline floor of `peaks` = (TFLOP/s, GB/s)."""
    device = require_cuda()
    notes: list[str] = []
    sets, rotated, cold = make_sets(spec, params, device, seed, l2_bytes(device), max_sets=max_sets)
    official = sets[0]                      # the reference recheck reads the official layout
    # what these inputs must move (before any call: an in-place op changes its inputs), and the shape's expectation
    cost, expected = spec.timed_cost(params, *draws_of(sets)), spec.cost(params)
    prepared = [impl.prepared(s) for s in sets]  # the load-time weight layout, outside the timed region
    if impl.form is not None:
        if all(p is not s for p, s in zip(prepared, sets)):   # a packed cache: what it reads, not the bf16 bytes
            packed = spec.form_cost(impl.form, params)
            notes.append(f"bytes: its {impl.form} form's, {packed.bytes / 1e6:.2f} MB (the op's "
                         f"{cost.bytes / 1e6:.2f} MB)")
            cost = expected = packed
        else:
            notes.append(f"these inputs did not pack into its {impl.form} form (prepare kept them): the bf16 path "
                         f"ran, the op's bytes")
    sets = prepared
    if not cold:
        notes.append(f"rotating sets cover {rotated / 2 ** 20:.1f} MiB < 3 x L2: partly L2-warm")
    kw = {"config": config} if config is not None else {}
    untouched = [clone(official), clone(official)] if spec.inplace else None   # for the in-place recheck
    calls = [(lambda s=s: impl.fn(**s, **kw)) for s in sets]
    calls[0]()              # compile and warm up outside any timed region
    torch.cuda.synchronize()
    clock0 = sm_clock_mhz()
    launches = 1
    if method == "graph":
        try:
            summary, outs, launches = time_graph(calls, **adaptive_kw)
        except Exception as e:  # noqa: BLE001 - a wrapper that is not capturable: say so, use events
            notes.append(f"graph capture failed ({type(e).__name__}: {e}); timed with events + L2 flush")
            torch.cuda.synchronize()
            method = "events"
    if method == "events":
        summary = time_events(calls, **adaptive_kw)
        outs = [c() for c in calls[:1]]
    clock1 = sm_clock_mhz()
    clocks = [c for c in (clock0, clock1) if c is not None]
    if spec.inplace:   # replays mutated the state: recheck a fresh call on an untouched copy
        mine, theirs = untouched
        ok, detail = recheck(spec, params, as_outputs(spec, impl.fn(**impl.prepared(mine), **kw), mine), theirs)
        detail = "fresh call (in-place op): " + detail
    else:
        ok, detail = recheck(spec, params, as_outputs(spec, outs[0], official), official)
    if abs(cost.bytes - expected.bytes) > 0.005 * expected.bytes:
        notes.append(f"bytes of these inputs: {cost.bytes / 1e6:.1f} MB (the shape's expectation "
                     f"{expected.bytes / 1e6:.1f} MB)")
    rerr = check_roofline(summary.median_us, cost.flops, cost.bytes, *peaks) if peaks else None
    return Measurement(op=spec.name, impl=impl.name, params=dict(params), label=spec.label(params),
                       config=dict(config or {}), method=method, summary=summary, flops=cost.flops,
                       bytes=cost.bytes, sets=len(sets), rotated_bytes=rotated, l2_cold=cold, launches=launches,
                       sm_clock_mhz=statistics.fmean(clocks) if clocks else None, verified=ok,
                       verify_detail=detail, roofline_error=rerr, notes=notes)



def clone(inputs: dict) -> dict:
    """A copy of an input dict: every tensor cloned, everything else shared."""
    return {k: (v.clone() if isinstance(v, torch.Tensor) else v) for k, v in inputs.items()}
