"""The regression gate for users' CI: compare a run's results with a baseline and fail on what matters.

Fatal findings:
- slowdown: the same (device, op, implementation, shape, config) got slower beyond noise: the
  median rose by more than `tolerance` AND the interquartile ranges no longer overlap
  (current q1 > baseline q3). A shift inside the spread of either run is noise, not a regression.
- verify: a timed result whose outputs did not match the reference (bench's recheck).
- tensor_cores: a kernel that had tensor-core instructions in the baseline inspection and lost them
  (our users' sparse attention and MoE GEMV ran on CUDA cores for weeks unnoticed), or an op that
  must use them (inspector.TENSOR_CORE_OPS) without any.
- sm120: a kernel over sm_120's 101,376 bytes of shared memory, spilling, or not compiling.
- missing (only with strict): a baseline result absent from the current run.
- empty / nothing_compared: the current run has no results, or shares none with the baseline (another
  GPU, other shapes): a gate that compared nothing fails and says so.
Not fatal: improvements, and baseline results absent without strict (reported).

Sources: a JSON file written by `kernelbench bench --json` / `kernelbench inspect --json`, or the
database: "db:latest", "db:commit=<sha prefix>", "db:tag=<run tag>" (optionally ",device=<name>").
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

from kernelbench.db.values import canonical_json


@dataclass
class Finding:
    kind: str
    op: str
    impl: str
    label: str
    detail: str
    fatal: bool

    def as_dict(self) -> dict:
        return asdict(self)


def row_key(r: dict) -> tuple:
    return (r.get("device", ""), r["op"], r["impl"], canonical_json(r.get("params") or r.get("label")),
            canonical_json(r.get("config") or {}))


# --- sources ------------------------------------------------------------------------------------

def parse_selector(text: str) -> dict:
    """'db:latest' | 'db:commit=abc' | 'db:tag=x,device=NVIDIA H200' -> {"commit": ..., ...}."""
    body = text[3:]
    sel: dict = {}
    for part in filter(None, body.split(",")):
        if part == "latest":
            sel["latest"] = True
            continue
        k, eq, v = part.partition("=")
        if not eq or k not in ("commit", "tag", "device"):
            raise ValueError(f"bad database selector {text!r}: use db:latest, db:commit=<sha>, db:tag=<run tag>, "
                             "optionally with ,device=<gpu name>")
        sel[k] = v
    return sel


def db_rows(store, commit: str | None = None, tag: str | None = None, device: str | None = None,
            latest: bool = False) -> list[dict]:
    """Bench results from the database: one git commit (prefix), one run tag, or the newest run tag."""
    rows = store.bench_results(device=device, commit=commit, run_tag=tag or None)
    if latest and rows:
        newest = rows[-1]["run_tag"]
        rows = [b for b in rows if b["run_tag"] == newest]
    out = {}
    for b in rows:
        r = {k: b[k] for k in ("device", "op", "impl", "label", "params", "config", "median_us", "q1_us", "q3_us")}
        r.update(verified=b["extra"].get("verified", True), verify_detail=b["extra"].get("verify_detail", ""),
                 git_commit=b["git_commit"], run_tag=b["run_tag"])
        out[row_key(r)] = r       # the newest row of each key wins
    return list(out.values())


def load_bench(source: str, store=None) -> list[dict]:
    if source.startswith("db:"):
        if store is None:
            raise ValueError("a db: source needs a database (--db)")
        rows = db_rows(store, **parse_selector(source))
        if not rows:
            raise ValueError(f"no bench results in the database for {source!r}")
        return rows
    path = Path(source)
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise ValueError(f"no results file at {path}{_FIRST_BASELINE if 'baseline' in str(path) else ''}") from None
    except json.JSONDecodeError as e:
        raise ValueError(f"{path} is not valid JSON ({e})") from None
    rows = data.get("results") if isinstance(data, dict) else data
    if not isinstance(rows, list) or not all(isinstance(r, dict) and {"op", "impl", "median_us"} <= set(r) for r in rows):
        raise ValueError(f"{path} is not a `kernelbench bench --json` file (a list of results with op, impl, "
                         "median_us)")
    return rows


_FIRST_BASELINE = (" (a first bench baseline is written on the GPU runner by `ci/gate.sh baseline`, or "
                   "`kernelbench bench ... --json ci/baseline/bench.json`; commit it)")


def load_inspect(path: str) -> list[dict]:
    try:
        data = json.loads(Path(path).read_text())
    except (FileNotFoundError, json.JSONDecodeError) as e:
        raise ValueError(f"cannot read inspection {path}: {e}") from None
    reports = data.get("reports") if isinstance(data, dict) else data
    if not isinstance(reports, list):
        raise ValueError(f"{path} is not a `kernelbench inspect --json` file")
    return reports


# --- comparisons --------------------------------------------------------------------------------

def compare_bench(baseline: list[dict], current: list[dict], tolerance: float = 0.05,
                  strict: bool = False) -> list[Finding]:
    out = []
    base = {row_key(r): r for r in baseline}
    cur = {row_key(r): r for r in current}
    for k, c in cur.items():
        if not c.get("verified", True):
            out.append(Finding("verify", c["op"], c["impl"], c.get("label", ""),
                               f"timed outputs differ from the reference: {c.get('verify_detail', '')}", True))
        b = base.get(k)
        if b is None:
            continue
        bm, cm = b["median_us"], c["median_us"]
        bq3, cq1 = b.get("q3_us") or bm, c.get("q1_us") or cm
        bq1, cq3 = b.get("q1_us") or bm, c.get("q3_us") or cm
        change = cm / bm - 1
        if change > tolerance and cq1 > bq3:
            out.append(Finding("slowdown", c["op"], c["impl"], c.get("label", ""),
                               f"{bm:.2f} -> {cm:.2f} us (+{100 * change:.1f}%); IQRs [{bq1:.2f}, {bq3:.2f}] and "
                               f"[{cq1:.2f}, {cq3:.2f}] do not overlap", True))
        elif change < -tolerance and cq3 < bq1:
            out.append(Finding("improved", c["op"], c["impl"], c.get("label", ""),
                               f"{bm:.2f} -> {cm:.2f} us ({100 * change:.1f}%)", False))
    for k, b in base.items():
        if k not in cur:
            out.append(Finding("missing", b["op"], b["impl"], b.get("label", ""),
                               "in the baseline but not in this run", strict))
    return out


def _inspect_key(r: dict) -> tuple:
    return (r["op"], r["impl"], canonical_json(r.get("params") or r.get("label")), canonical_json(r.get("config") or {}))


def _by_launch(report: dict) -> dict[tuple[str, int], dict]:
    """A report's kernels keyed by (name, n-th launch of that name): a kernel launched twice with other
    constexprs (the MoE GEMM's up and down passes) is compared launch by launch, never across launches."""
    seen: dict[str, int] = {}
    out = {}
    for k in report.get("kernels", []):
        n = seen.get(k["kernel"], 0)
        seen[k["kernel"]] = n + 1
        out[(k["kernel"], n)] = k
    return out


def compare_inspect(current: list[dict], baseline: list[dict] | None = None) -> list[Finding]:
    """Problems of the current inspection (sm_120 limits, required tensor cores), plus kernels that
    lost tensor-core instructions since the baseline inspection (fatal), and that grew in shared memory or hold
    fewer programs an SM (reported)."""
    out = []
    base = {_inspect_key(r): r for r in baseline or []}
    for r in current:
        label = r.get("label", "")
        for p in r.get("problems", []):
            kind = "tensor_cores" if "tensor-core" in p else "sm120"
            out.append(Finding(kind, r["op"], r["impl"], label, p, True))
        b = base.get(_inspect_key(r))
        if b is None:
            continue
        lost = [k["kernel"] for k in b.get("kernels", []) if k.get("tensor_cores")
                and not any(c["kernel"] == k["kernel"] and c.get("tensor_cores") for c in r.get("kernels", []))]
        already = any("tensor-core" in p for p in r.get("problems", []))
        if lost and not already:
            out.append(Finding("tensor_cores", r["op"], r["impl"], label,
                               f"lost tensor-core instructions since the baseline: {', '.join(lost)}", True))
        now_by_launch = _by_launch(r)
        grown = [(key[0], k["shared_bytes"], now_by_launch[key]["shared_bytes"]) for key, k in _by_launch(b).items()
                 if key in now_by_launch and now_by_launch[key]["shared_bytes"] > k["shared_bytes"]]
        for name, was, now in grown:
            out.append(Finding("smem_growth", r["op"], r["impl"], label, f"{name}: shared memory {was} -> {now} B",
                               False))
        # fewer programs an SM than the baseline's (a kernel that no longer fits at all is already a problem)
        per_sm = {key: k.get("programs_per_sm", 0) for key, k in now_by_launch.items()}
        fewer = [(key[0], k["programs_per_sm"], per_sm[key]) for key, k in _by_launch(b).items()
                 if 0 < per_sm.get(key, 0) < k.get("programs_per_sm", 0)]
        for name, was, now in fewer:
            out.append(Finding("occupancy", r["op"], r["impl"], label, f"{name}: programs an SM {was} -> {now}",
                               False))
    return out


def coverage(kind: str, current: list[dict], baseline: list[dict] | None, key) -> list[Finding]:
    """A gate that compared nothing must not pass: an empty current run, or a baseline that shares no
    result with it (another GPU, other shapes or ops), is a fatal finding that says so."""
    if not current:
        return [Finding("empty", "", "", "", f"the current {kind} has no results: nothing was checked", True)]
    if baseline:
        shared = {key(r) for r in baseline} & {key(r) for r in current}
        if not shared:
            devices = sorted({r.get("device", "") for r in baseline} - {r.get("device", "") for r in current})
            hint = f" (the baseline is from {', '.join(devices)})" if devices and kind == "bench run" else ""
            return [Finding("nothing_compared", "", "", "",
                            f"none of the {len(current)} results of the current {kind} is in the baseline "
                            f"({len(baseline)} results){hint}: nothing was compared", True)]
    return []


def markdown(findings: list[Finding], passed: bool) -> str:
    lines = [f"## kernelbench gate: {'PASSED' if passed else 'FAILED'}", "",
             "| | kind | op | impl | shape | detail |", "|---|---|---|---|---|---|"]
    for f in sorted(findings, key=lambda f: (not f.fatal, f.kind, f.op)):
        lines.append(f"| {'FAIL' if f.fatal else 'info'} | {f.kind} | {f.op} | {f.impl} | {f.label} | {f.detail} |")
    if not findings:
        lines.append("| | | | | | no findings |")
    return "\n".join(lines) + "\n"
