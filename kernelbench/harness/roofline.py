"""Rooflines: where each kernel stands against what the hardware allows.

Per op and shape: arithmetic intensity I = FLOPs / bytes from `OpSpec.cost` (the fewest bytes the op
must move); the ridge point peak_tflops / bandwidth; the bound (memory when I is under the ridge);
the floor time max(bytes / bandwidth, FLOPs / peak); and, for a measured time, the achieved
fraction floor / time (1.0 = at the roofline). Ceilings come from `kernelbench calibrate` for the
device when there are any, else from the datasheet (kernelbench/harness/devices.py), and the table says
which. The compute peak is the precision the op's matrix work runs in (PRECISION below).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

from kernelbench.harness import devices

# The tensor-core precision of each op's dominant matrix work (fp4-weight ops run fp8 MMAs after
# the activation quantization docs/OPS.md specifies); every other op is bf16 or CUDA-core work.
PRECISION = {"fp8_linear": "fp8", "fp4_linear": "fp8", "moe_experts": "fp8", "shared_expert": "fp8",
             "moe_layer": "fp8", "indexer_q": "fp8"}


@dataclass(frozen=True)
class Ceilings:
    device: str
    gbps: float
    tflops: dict          # precision -> TFLOP/s
    source: str           # "calibrated", "datasheet" or "calibrated+datasheet"

    def peak(self, op: str) -> float:
        return self.tflops.get(PRECISION.get(op, "bf16")) or self.tflops.get("bf16", 0.0)


def ceilings_for(device: str, calibrated: dict | None = None) -> Ceilings:
    """Calibrated values where measured, datasheet values for the rest."""
    spec = devices.find(device)
    sheet = {"gbps": spec.bandwidth_gbps, "bf16": spec.bf16_tflops, "fp8": spec.fp8_tflops} if spec else {}
    cal = calibrated or {}
    got = {"gbps": cal.get("copy_gbps"), "bf16": cal.get("bf16_tflops"), "fp8": cal.get("fp8_tflops")}
    merged = {k: got[k] if got.get(k) else sheet.get(k) for k in ("gbps", "bf16", "fp8")}
    if not merged["gbps"]:
        raise ValueError(f"no ceilings for {device!r}: run `kernelbench calibrate` on it, or name a datasheet "
                         f"device ({', '.join(devices.DEVICES)})")
    used = {"calibrated" if got.get(k) else "datasheet" for k in merged if merged[k]}
    return Ceilings(device, merged["gbps"], {"bf16": merged["bf16"] or 0.0, "fp8": merged["fp8"] or 0.0},
                    "+".join(sorted(used)))


@dataclass
class Point:
    op: str
    impl: str
    label: str
    flops: float
    bytes: float
    intensity: float
    bound: str
    floor_us: float
    median_us: float | None = None
    achieved_tflops: float | None = None
    achieved_gbps: float | None = None
    fraction: float | None = None
    flag: str = ""

    def as_dict(self) -> dict:
        return asdict(self)


def point(op: str, impl: str, label: str, flops: float, nbytes: float, ceil: Ceilings,
          median_us: float | None = None) -> Point:
    peak = ceil.peak(op)
    intensity = flops / nbytes if nbytes else float("inf")
    ridge = peak * 1e12 / (ceil.gbps * 1e9) if ceil.gbps else float("inf")
    t_mem = nbytes / (ceil.gbps * 1e9) * 1e6
    t_math = flops / (peak * 1e12) * 1e6 if peak else 0.0
    p = Point(op, impl, label, flops, nbytes, intensity, "memory" if intensity < ridge else "compute",
              max(t_mem, t_math))
    if median_us:
        p.median_us = median_us
        p.achieved_tflops = flops / median_us / 1e6
        p.achieved_gbps = nbytes / median_us / 1e3
        p.fraction = p.floor_us / median_us
        if p.fraction > 1.05:
            p.flag = "above the roofline: measurement error (warm L2? skipped work?)"
    return p


def table(points: list[Point], ceil: Ceilings, title: str = ""):
    from rich.table import Table
    t = Table(title=title or f"roofline on {ceil.device} ({ceil.source}: {ceil.gbps:.0f} GB/s, "
                             f"bf16 {ceil.tflops['bf16']:.0f} / fp8 {ceil.tflops['fp8']:.0f} TFLOP/s)")
    for col in ("op", "impl", "shape", "FLOP/B", "bound", "floor us", "us", "GB/s", "TFLOP/s", "% of roof", "flag"):
        t.add_column(col, justify="left" if col in ("op", "impl", "shape", "bound", "flag") else "right")
    for p in points:
        t.add_row(p.op, p.impl, p.label, f"{p.intensity:.2f}", p.bound, f"{p.floor_us:.2f}",
                  "-" if p.median_us is None else f"{p.median_us:.2f}",
                  "-" if p.achieved_gbps is None else f"{p.achieved_gbps:.0f}",
                  "-" if p.achieved_tflops is None else f"{p.achieved_tflops:.2f}",
                  "-" if p.fraction is None else f"{100 * p.fraction:.1f}", p.flag)
    return t


def plot(points: list[Point], ceil: Ceilings, path: str, title: str = "") -> str:
    """Log-log roofline (bandwidth slope, bf16 and fp8 roofs) with every measured kernel as a point."""
    from kernelbench.extras import pyplot
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(11, 7))
    xs = [p.intensity for p in points if p.intensity > 0] or [1.0]
    lo, hi = min(xs + [0.1]) / 2, max(xs + [1e4]) * 2
    grid = [lo * (hi / lo) ** (i / 200) for i in range(201)]
    for prec, style in (("bf16", "-"), ("fp8", "--")):
        peak = ceil.tflops.get(prec)
        if peak:
            ax.plot(grid, [min(peak, x * ceil.gbps / 1e3) for x in grid], style, color="k", lw=1,
                    label=f"{prec} roof {peak:.0f} TFLOP/s, {ceil.gbps:.0f} GB/s")
    measured = [p for p in points if p.achieved_tflops]
    impls = sorted({p.impl for p in measured})
    markers = dict(zip(impls, "os^Dv<>ph*"))
    for p in measured:
        ax.scatter(p.intensity, p.achieved_tflops, marker=markers.get(p.impl, "o"), s=28,
                   color="red" if p.flag else None)
        ax.annotate(f"{p.op} {p.label}"[:40], (p.intensity, p.achieved_tflops), fontsize=5, alpha=0.7)
    for impl in impls:
        ax.scatter([], [], marker=markers.get(impl, "o"), color="gray", label=f"impl {impl}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP / byte, fewest bytes)")
    ax.set_ylabel("achieved TFLOP/s")
    ax.set_title(title or f"{ceil.device}: ceilings {ceil.source}")
    ax.legend(fontsize=7, loc="lower right")
    ax.grid(True, which="both", alpha=0.2)
    fig.tight_layout()
    fig.savefig(path, dpi=150)
    plt.close(fig)
    return path


def latest_bench(store, device: str | None = None, ops: list[str] | None = None) -> list[dict]:
    """The newest bench_result per (device, implementation, params, config) as dicts."""
    from kernelbench.db.values import canonical_json
    latest: dict = {}
    for b in store.bench_results(ops=ops or None, device=device):
        key = (b["device"], b["op"], b["impl"], canonical_json(b["params"]), canonical_json(b["config"]))
        latest[key] = {**{k: b[k] for k in ("device", "op", "impl", "label", "params", "config", "median_us",
                                            "q1_us", "q3_us", "flops", "bytes", "git_commit", "extra")},
                       "created": str(b["created"]), "environment_id": b["environment_id"]}
    return list(latest.values())
