"""How an op's time on a device moved across commits: the bench results of the database, one
column per git commit (oldest first), one row per (implementation, shape, config)."""
from __future__ import annotations

from dataclasses import dataclass, field

from kernelbench.db.values import canonical_json


@dataclass
class Series:
    device: str
    impl: str
    label: str
    config: dict
    points: list[tuple[str, str, float, float | None, float | None]] = field(default_factory=list)
    # (git commit, run tag, median us, q1, q3), oldest first


def load(store, op: str, device: str | None = None, impl: str | None = None) -> tuple[list[str], list[Series]]:
    """(commits oldest first, series). The newest result of a commit stands for it."""
    commits: list[str] = []
    series: dict = {}
    for b in store.bench_results(ops=[op], impl=impl, device=device):
        commit = b["git_commit"] or "(no commit)"
        if commit not in commits:
            commits.append(commit)
        key = (b["device"], b["impl"], b["label"], canonical_json(b["config"]))
        sr = series.setdefault(key, Series(b["device"], b["impl"], b["label"], b["config"]))
        sr.points = [p for p in sr.points if p[0] != commit] + [(commit, b["run_tag"], b["median_us"], b["q1_us"],
                                                                  b["q3_us"])]
    return commits, list(series.values())


def table(op: str, commits: list[str], series: list[Series]):
    from rich.table import Table
    t = Table(title=f"{op}: median us per commit (oldest first)")
    for col in ("device", "impl", "shape", "config"):
        t.add_column(col)
    for c in commits:
        t.add_column(c[:10], justify="right")
    t.add_column("change", justify="right")
    for sr in series:
        by = {p[0]: p[2] for p in sr.points}
        first, last = sr.points[0][2], sr.points[-1][2]
        t.add_row(sr.device.replace("NVIDIA ", ""), sr.impl, sr.label[:40], canonical_json(sr.config)[:30],
                  *[f"{by[c]:.2f}" if c in by else "-" for c in commits], f"{100 * (last / first - 1):+.1f}%")
    return t


def plot(op: str, commits: list[str], series: list[Series], path: str) -> str:
    from kernelbench.extras import pyplot
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(10, 5))
    idx = {c: i for i, c in enumerate(commits)}
    for sr in series:
        xs = [idx[p[0]] for p in sr.points]
        ax.plot(xs, [p[2] for p in sr.points], marker="o", label=f"{sr.impl} {sr.label}"[:50])
    ax.set_xticks(range(len(commits)), [c[:8] for c in commits], rotation=45, fontsize=7)
    ax.set_ylabel("median us")
    ax.set_yscale("log")
    ax.set_title(f"{op} across commits")
    ax.legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(path, dpi=130)
    plt.close(fig)
    return path
