"""Bench results from the database in the formats other tools read (`kernelbench export`).

    pytest-benchmark          the JSON `pytest --benchmark-json` writes (stats in seconds, one round per
                              sample), so `pytest-benchmark compare` and `--benchmark-compare` read it
    github-action-benchmark   the `customSmallerIsBetter` tool's input: a list of {name, unit, value,
                              range, extra}, value the median in us, range the half-IQR
    bencher                   Bencher Metric Format: {benchmark: {"latency": {value, lower_value,
                              upper_value}}}, latency in nanoseconds (Bencher's unit), bounds q1 and q3

A benchmark's name is "op/impl label" plus the config when it is not the default, and the device
when the rows span several. Rows are one run (a run tag; default: the newest run in the database).
"""
from __future__ import annotations

import datetime as _dt
import platform
from dataclasses import dataclass
from typing import Callable

from kernelbench.db.values import canonical_json, utcnow

FORMATS = ("pytest-benchmark", "github-action-benchmark", "bencher")


@dataclass
class Row:
    device: str
    op: str
    impl: str
    label: str
    params: dict
    config: dict
    method: str
    median_us: float
    q1_us: float | None
    q3_us: float | None
    samples: list[float]
    git_commit: str
    run_tag: str
    created: _dt.datetime
    extra: dict

    def name(self, with_device: bool) -> str:
        cfg = f" {canonical_json(self.config)}" if self.config else ""
        dev = f"{self.device}: " if with_device else ""
        return f"{dev}{self.op}/{self.impl} {self.label}{cfg}"


def load(store, run_tag: str | None = None, ops: tuple[str, ...] = ()) -> tuple[str | None, list[Row]]:
    """The bench results of one run (default: the newest), oldest first."""
    run_tag = run_tag if run_tag is not None else store.newest_bench_run_tag()
    if run_tag is None:
        return None, []
    found = sorted(store.bench_results(ops=ops or None, run_tag=run_tag), key=lambda b: b["id"])
    rows = [Row(b["device"], b["op"], b["impl"], b["label"], b["params"], b["config"], b["method"], b["median_us"],
                b["q1_us"], b["q3_us"], list(b["samples"] or [b["median_us"]]), b["git_commit"], b["run_tag"],
                b["created"], b["extra"]) for b in found]
    return run_tag, rows


def _names(rows: list[Row]) -> list[str]:
    with_device = len({r.device for r in rows}) > 1
    return [r.name(with_device) for r in rows]


def to_pytest_benchmark(rows: list[Row]) -> dict:
    from kernelbench.extras import pytest_benchmark_stats
    Stats = pytest_benchmark_stats()
    benchmarks = []
    for r, name in zip(rows, _names(rows)):
        st = Stats()
        for us in r.samples:
            st.update(us * 1e-6)
        stats = {**st.as_dict(), "data": list(st.data), "iterations": 1}
        benchmarks.append({
            "group": r.op, "name": name, "fullname": f"kernelbench::{name}", "params": r.params,
            "param": r.label, "extra_info": {"device": r.device, "impl": r.impl, "config": r.config,
                                             "method": r.method, "run_tag": r.run_tag},
            "options": {"timer": f"kernelbench.harness.timing ({r.method})", "disable_gc": False, "min_rounds": len(r.samples),
                        "max_time": 0.0, "min_time": 0.0, "warmup": False},
            "stats": stats})
    commit = rows[0].git_commit if rows else ""
    return {"machine_info": {"node": platform.node(), "machine": platform.machine(), "system": platform.system(),
                             "python_version": platform.python_version(),
                             "gpus": sorted({r.device for r in rows})},
            "commit_info": {"id": commit, "dirty": commit.endswith("-dirty"), "project": "kernelbench"},
            "benchmarks": benchmarks,
            "datetime": (max(r.created for r in rows) if rows else utcnow()).isoformat(),
            "version": "kernelbench-export"}


def to_github_action_benchmark(rows: list[Row]) -> list[dict]:
    out = []
    for r, name in zip(rows, _names(rows)):
        entry = {"name": name, "unit": "us", "value": r.median_us,
                 "extra": f"{r.device}; {r.method}; n={len(r.samples)}; commit {r.git_commit[:12]}"}
        if r.q1_us is not None and r.q3_us is not None:
            entry["range"] = f"± {(r.q3_us - r.q1_us) / 2:.4g}"
        out.append(entry)
    return out


def to_bencher(rows: list[Row]) -> dict:
    out: dict = {}
    for r, name in zip(rows, _names(rows)):
        metric = {"value": r.median_us * 1e3}
        if r.q1_us is not None and r.q3_us is not None:
            metric.update(lower_value=r.q1_us * 1e3, upper_value=r.q3_us * 1e3)
        out[name] = {"latency": metric}
    return out


CONVERTERS: dict[str, Callable[[list[Row]], object]] = {
    "pytest-benchmark": to_pytest_benchmark,
    "github-action-benchmark": to_github_action_benchmark,
    "bencher": to_bencher,
}


def export(store, fmt: str, run_tag: str | None = None, ops: tuple[str, ...] = ()) -> tuple[str | None, int, object]:
    """(run tag, row count, the document) of one run in format `fmt`."""
    if fmt not in CONVERTERS:
        raise ValueError(f"unknown export format {fmt!r}; use one of {', '.join(FORMATS)}")
    tag, rows = load(store, run_tag, ops)
    return tag, len(rows), CONVERTERS[fmt](rows)

