"""Scaling: how an op's time moves with batch, with context, and with allocated capacity.

Our users' decode step cost 40 ms + 31 ms x N for N concurrent requests: a per-request cost that
batching did not amortize, so throughput flattened at 1000/31 = 32 tokens/s. The cause was the
lightning indexer scoring the whole ~1M-token allocated context instead of the ~512 tokens present.
Both show up only when time is measured against the right axis:

- batch (C = tokens per step): fit time = a + b*C. `b` is the per-request cost and 1e6/b the
  requests/s ceiling it imposes. Flagged when time grows faster than the op's work (OpSpec.cost
  bytes and FLOPs) says it must: a GEMV whose weights dominate should be nearly flat in C.
- context (actual length): fit time = a + b*ctx; flagged when it grows faster than the work.
- capacity (allocated cache size at a FIXED actual length): the work does not change, so the time
  must not either; growth beyond noise means the kernel's cost follows the allocation.
"Faster than the work" = measured growth t(x_max)/t(x_min) over modeled growth (the roofline floor
at x_max over x_min, with the floor never under a fixed launch cost) above `ratio` (1.25), with the
end points' interquartile ranges disjoint, so noise is never a finding.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Callable

AXES = ("batch", "context", "capacity")
LAUNCH_US = 3.0     # a floor under modeled times: one launch's latency (H200 graph replay, ~2-4 us)

# Sweeps run by `kernelbench scaling` (flash-tp8 shapes). The indexer's capacity axis is its
# key-cache rows (cap, 1/4 of tokens); sparse attention's csa kind attends a fixed 512 + 128 entries
# whatever the context, so its context axis is a capacity test too (the kv cache grows with ctx).
PRESETS = {
    "indexer_topk": [
        ("capacity", {"T": 16, "Hi": 64, "topk": 512, "ctx": 512, "cap": 128, "ragged": False}, "cap",
         [2048, 16384, 262144]),
        ("batch", {"T": 1, "Hi": 64, "topk": 512, "ctx": 8192, "cap": 2048, "ragged": False}, "T", [1, 4, 16, 64]),
        ("context", {"T": 4, "Hi": 64, "topk": 512, "ctx": 512, "cap": 128, "ragged": False}, "ctx",
         [512, 8192, 65536, 262144, 1048576]),
    ],
    "sparse_attention": [
        ("capacity", {"T": 4, "Hl": 8, "Dh": 512, "R": 64, "W": 128, "kind": "csa", "topk": 512, "ctx": 8192,
                      "ragged": False, "rope": True, "lengths": True}, "ctx", [8192, 65536, 262144, 1048576]),
        ("batch", {"T": 1, "Hl": 8, "Dh": 512, "R": 64, "W": 128, "kind": "csa", "topk": 512, "ctx": 8192,
                   "ragged": False, "rope": True, "lengths": True}, "T", [1, 4, 16, 64]),
        ("context", {"T": 4, "Hl": 8, "Dh": 512, "R": 64, "W": 128, "kind": "hca", "topk": 512, "ctx": 8192,
                     "ragged": False, "rope": True, "lengths": True}, "ctx", [8192, 65536, 262144, 1048576]),
        # hca index rows are W + capacity wide (attention_indices' fixed width): lengths must keep the
        # time at the actual length's
        ("capacity", {"T": 4, "Hl": 8, "Dh": 512, "R": 64, "W": 128, "kind": "hca", "topk": 512, "ctx": 8192,
                      "cap": 0, "ragged": False, "rope": True, "lengths": True}, "cap", [0, 2048, 8192]),
    ],
}
# the indexer's context sweep keeps the cache just big enough for the context
DERIVE = {("indexer_topk", "context"): lambda p: {**p, "cap": max(p["cap"], p["ctx"] // 4)}}


# two-sided 95% Student t quantiles by degrees of freedom (1..30); 1.96 beyond
_T95 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
        2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042)


@dataclass
class Fit:
    a: float
    b: float
    r2: float
    a_ci: float = float("nan")    # 95% confidence half-widths (nan with two points: no residual left)
    b_ci: float = float("nan")


def fit_line(xs: list[float], ys: list[float]) -> Fit:
    """Least squares y = a + b x, with 95% confidence intervals of a and b."""
    n = len(xs)
    if n < 2:
        raise ValueError("a fit needs at least two points")
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx if sxx else 0.0
    a = my - b * mx
    ss_tot = sum((y - my) ** 2 for y in ys)
    ss_res = sum((y - a - b * x) ** 2 for x, y in zip(xs, ys))
    fit = Fit(a, b, 1 - ss_res / ss_tot if ss_tot else 1.0)
    if n > 2 and sxx:
        t = _T95[n - 3] if n - 2 <= len(_T95) else 1.96
        s2 = ss_res / (n - 2)
        fit.b_ci = t * (s2 / sxx) ** 0.5
        fit.a_ci = t * (s2 * (1 / n + mx * mx / sxx)) ** 0.5
    return fit


@dataclass
class Point:
    x: float
    params: dict
    median_us: float
    q1_us: float
    q3_us: float
    modeled_us: float


@dataclass
class Sweep:
    op: str
    impl: str
    axis: str
    key: str
    points: list[Point]
    fit: Fit | None = None
    growth: float = 1.0           # measured t(x_max) / t(x_min)
    modeled_growth: float = 1.0   # roofline floor (>= LAUNCH_US) at x_max / at x_min
    flags: list[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        return asdict(self)


def modeled_us(spec, params: dict, gbps: float, tflops: float) -> float:
    c = spec.cost(params)
    return max(LAUNCH_US, c.bytes / (gbps * 1e9) * 1e6, c.flops / (tflops * 1e12) * 1e6)


def analyse(sw: Sweep, ratio: float = 1.25) -> Sweep:
    pts = sorted(sw.points, key=lambda p: p.x)
    sw.points = pts
    sw.fit = fit_line([p.x for p in pts], [p.median_us for p in pts])
    lo, hi = pts[0], pts[-1]
    sw.growth = hi.median_us / lo.median_us
    sw.modeled_growth = hi.modeled_us / lo.modeled_us
    beyond_noise = hi.q1_us > lo.q3_us
    excess = sw.growth / sw.modeled_growth
    if not (beyond_noise and excess > ratio):
        return sw
    span = f"{sw.key}={lo.x:g} -> {hi.x:g}: {lo.median_us:.2f} -> {hi.median_us:.2f} us (x{sw.growth:.2f}, work x{sw.modeled_growth:.2f})"
    if sw.axis == "capacity":
        sw.flags.append(f"time grows with allocated capacity at a fixed actual length ({span}): the cost follows "
                        f"the allocation, not the tokens present (the users' 1M-context indexer bug)")
    elif sw.axis == "batch":
        b = sw.fit.b
        sw.flags.append(f"per-request cost not amortized by batching ({span}); fit {sw.fit.a:.2f} + {b:.3f} us x "
                        f"{sw.key} caps this op at {1e6 / b:,.0f} requests/s" if b > 0 else span)
    else:
        sw.flags.append(f"time grows faster with context than the work does ({span}); fit {sw.fit.a:.2f} + "
                        f"{sw.fit.b:.3g} us x {sw.key}")
    return sw


Measure = Callable[[object, object, dict], object]   # (spec, impl, params) -> has median_us, q1_us, q3_us


def sweep(spec, impl, axis: str, base: dict, key: str, values: list, measure: Measure, gbps: float, tflops: float,
          derive: Callable[[dict], dict] | None = None, ratio: float = 1.25, on_point=None) -> Sweep:
    if axis not in AXES:
        raise ValueError(f"unknown axis {axis!r}; one of {', '.join(AXES)}")
    sw = Sweep(spec.name, impl.name, axis, key, [])
    for v in values:
        params = {**base, key: v}
        params = derive(params) if derive else params
        s = measure(spec, impl, params)
        if on_point:
            on_point(params, s)
        sw.points.append(Point(float(v), params, s.median_us, s.q1_us, s.q3_us, modeled_us(spec, params, gbps, tflops)))
    return analyse(sw, ratio)


def plot(sweeps: list[Sweep], path: str) -> str:
    from kernelbench.extras import pyplot
    plt = pyplot()
    fig, axes = plt.subplots(1, max(1, len(sweeps)), figsize=(5 * max(1, len(sweeps)), 4), squeeze=False)
    for ax, sw in zip(axes[0], sweeps):
        xs = [p.x for p in sw.points]
        ax.errorbar(xs, [p.median_us for p in sw.points],
                    yerr=[[p.median_us - p.q1_us for p in sw.points], [p.q3_us - p.median_us for p in sw.points]],
                    marker="o", label=f"{sw.impl} measured")
        ax.plot(xs, [p.modeled_us for p in sw.points], "k--", lw=1, label="roofline floor")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel(sw.key)
        ax.set_ylabel("us")
        ax.set_title(f"{sw.op} {sw.axis}" + (" FLAGGED" if sw.flags else ""), color="red" if sw.flags else "black",
                     fontsize=9)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=130)
    plt.close(fig)
    return path


# --- a whole run (what `kernelbench scaling` calls) -----------------------------------------------

def scaling_work(ops, impl_names, axes) -> list[tuple]:
    """(spec, impl, axis, base, key, values) of every preset sweep of OPS (every preset op when none are
    named), restricted to `impl_names` and `axes` when given. ValueError for an op without a preset."""
    from kernelbench import registry
    for op in ops or ():
        if op not in PRESETS:
            raise ValueError(f"no scaling preset for {op!r}; presets: {', '.join(PRESETS)}")
    return [(registry.get_op(op), impl, axis, base, key, values)
            for op in ops or sorted(PRESETS)
            for impl in sorted(registry.impls(op).values(), key=lambda i: i.name)
            if not impl_names or impl.name in impl_names
            for axis, base, key, values in PRESETS[op] if not axes or axis in axes]


def scaling_run(work: list[tuple], *, store, env_id: int, ceilings, peaks, run_tag: str, git_commit: str,
                max_time_s: float, ratio: float, device: str = "", json_out: str | None = None,
                advance: Callable[[str], None] = lambda s: None,
                log: Callable[[str], None] = lambda s: None) -> list[Sweep]:
    """Measure every sweep of `work` on the GPU, store each point as a bench result (run tag
    "<run_tag>:<op>:<axis>"), and return the analysed sweeps; a failing sweep is logged and skipped.
    With `json_out`, the sweeps so far are written there after each one."""
    from kernelbench.harness import bench, timing
    sweeps = []
    for spec, impl, axis, base, key, values in work:
        op = spec.name

        def measure(spec, impl, params, impl_=impl, tag_=f"{run_tag}:{op}:{axis}"):
            advance(f"{spec.name}/{impl_.name} {axis}")
            m = timing.measure_impl(spec, impl_, params, max_sets=4, max_time_s=max_time_s, peaks=peaks)
            bench.record(store, env_id, impl_, m, ceilings, tag_, git_commit)
            bench.free_memory()
            return m.summary

        try:
            sw = sweep(spec, impl, axis, base, key, values, measure, ceilings.gbps, ceilings.peak(op),
                       derive=DERIVE.get((op, axis)), ratio=ratio,
                       on_point=lambda p, s, impl=impl, key=key: log(f"  {op}/{impl.name} {key}={p[key]}: "
                                                                      f"{s.median_us:.2f} us"))
        except Exception as e:  # noqa: BLE001 - report and go on with the next sweep
            log(f"[red]{op}/{impl.name} {axis}: {type(e).__name__}: {e}[/red]")
            bench.free_memory()
            continue
        sweeps.append(sw)
        if json_out:   # after every sweep: a run cut short still leaves what it measured
            write_json(json_out, device, run_tag, sweeps)
    return sweeps


def write_json(path: str, device: str, run_tag: str, sweeps: list[Sweep]) -> None:
    import json
    with open(path, "w") as f:
        json.dump({"device": device, "run_tag": run_tag, "sweeps": [s.as_dict() for s in sweeps]}, f, indent=1)


SUMMARY_COLUMNS = ("op", "impl", "axis", "x", "us (median)", "floor us", "fit a + b x", "r2", "flags")


def summary_rows(sweeps: list[Sweep]) -> list[tuple[str, ...]]:
    """One row per sweep, in SUMMARY_COLUMNS' order, for the command's table."""
    return [(sw.op, sw.impl, sw.axis, " ".join(f"{p.x:g}" for p in sw.points),
             " ".join(f"{p.median_us:.1f}" for p in sw.points), " ".join(f"{p.modeled_us:.1f}" for p in sw.points),
             f"{sw.fit.a:.2f} + {sw.fit.b:.3g} x", f"{sw.fit.r2:.3f}", "; ".join(sw.flags) or "-")
            for sw in sweeps]
