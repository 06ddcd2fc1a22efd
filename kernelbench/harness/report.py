"""`kernelbench report`: one page from the database, to paste into a PR or a chat.

Sections: the device fingerprint; the decode table (newest `decode-bench` run: step time, tokens/s,
roofline per C, the fit a + b*C with its confidence interval, scaling flags); scaling plots (step
vs C and vs context, measured beside the bandwidth roofline); per-op stacked bars; the kernel
roofline chart (newest `bench` results); the verify status of every kernel (newest run of each);
and the gate's verdict (a `kernelbench gate --json` file). Output: a self-contained HTML file (plots
inlined as PNG) or Markdown with the PNGs written beside it. Plots need matplotlib; without it the
page says so and keeps the tables.
"""
from __future__ import annotations

import base64
import html
import io
import json
import math
from dataclasses import dataclass, field
from pathlib import Path

from kernelbench.decoder.decode_bench import DECODE_OP, IDLE, NOT_OPS, op_rows_busy

FINGERPRINT_KEYS = ("gpu_name", "compute_capability", "sm_count", "memory_bytes", "driver", "cuda", "torch", "triton",
                    "python", "hostname", "cpu")


class ReportError(ValueError):
    pass


@dataclass
class Section:
    title: str
    text: list[str] = field(default_factory=list)
    tables: list[tuple[list[str], list[list[str]]]] = field(default_factory=list)
    images: list[tuple[str, bytes]] = field(default_factory=list)     # (name, PNG bytes)


# ------------------------------------------------------------------------------------------------
# what the database holds
# ------------------------------------------------------------------------------------------------
def decode_runs(store) -> list[dict]:
    """Every decode_step row, oldest first, as dicts with run_tag and environment."""
    return [{**{k: b[k] for k in ("impl", "params", "median_us", "q1_us", "q3_us", "bytes", "run_tag", "git_commit",
                                  "extra", "environment_id", "method")}, "created": str(b["created"])}
            for b in store.bench_results(ops=[DECODE_OP])]


def newest_decode(store, run_tag: str | None = None) -> list[dict]:
    rows = decode_runs(store)
    if not rows:
        return []
    tag = run_tag or rows[-1]["run_tag"]
    got = [r for r in rows if r["run_tag"] == tag]
    if not got:
        raise ReportError(f"no decode-bench rows with run tag {tag!r}; tags: "
                          f"{', '.join(sorted({r['run_tag'] for r in rows}))}")
    return got


def environment(store, env_id: int) -> dict:
    e = store.environment(env_id)
    return {k: e[k] for k in FINGERPRINT_KEYS + ("git_commit", "fingerprint")} if e else {}


def verify_status(store) -> list[dict]:
    """Per (op, implementation name): the newest verify run that checked it, its examples and failures."""
    runs: dict = {}
    for v in store.verify_outcomes():
        op, impl, run = v["op"], v["impl"], v["run_id"]
        r = runs.setdefault((op, impl, run), {"op": op, "impl": impl, "run": run, "examples": 0, "failed": 0,
                                              "started": v["started"], "device": v["device"],
                                              "git_commit": v["git_commit"]})
        r["examples"] += 1
        r["failed"] += 0 if v["passed"] else 1
    newest: dict = {}
    for r in runs.values():
        key = (r["op"], r["impl"])
        if key not in newest or (r["started"], r["run"]) > (newest[key]["started"], newest[key]["run"]):
            newest[key] = r
    return [newest[k] for k in sorted(newest)]


# ------------------------------------------------------------------------------------------------
# plots (matplotlib optional)
# ------------------------------------------------------------------------------------------------
def _plt():
    try:
        import matplotlib
    except ImportError:
        return None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def _png(fig, plt) -> bytes:
    buf = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buf, format="png", dpi=110)
    plt.close(fig)
    return buf.getvalue()


def scaling_plot(plt, pts: list[dict], xkey: str, xlabel: str, fit: dict | None) -> bytes:
    fig, ax = plt.subplots(figsize=(6, 4))
    xs = [p["params"][xkey] if xkey == "C" else p["extra"].get("mean_context", p["params"]["context"]) for p in pts]
    ms = [p["median_us"] / 1e3 for p in pts]
    err = [[max(0.0, p["median_us"] - (p["q1_us"] or p["median_us"])) / 1e3 for p in pts],
           [max(0.0, (p["q3_us"] or p["median_us"]) - p["median_us"]) / 1e3 for p in pts]]
    ax.errorbar(xs, ms, yerr=err, marker="o", label="measured step")
    roof = [p["extra"].get("roofline_ms") for p in pts]
    if all(r is not None for r in roof):
        ax.plot(xs, roof, "k--", lw=1, label="bandwidth roofline")
    if fit and fit.get("b_ms") is not None and xkey == "C":
        ax.plot(xs, [fit["a_ms"] + fit["b_ms"] * x for x in xs], ":", lw=1,
                label=f"fit {fit['a_ms']:.2f} + {fit['b_ms']:.3f} x C")
    ax.set_xscale("log", base=2)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("ms per step")
    ax.legend(fontsize=7)
    ax.grid(True, alpha=0.3)
    return _png(fig, plt)


def stacked_ops_plot(plt, pts: list[dict], top: int = 8) -> bytes:
    totals: dict[str, float] = {}
    for p in pts:
        for r in p["extra"].get("attribution", []):
            if r["op"] not in NOT_OPS:
                totals[r["op"]] = totals.get(r["op"], 0.0) + r["gpu_ms"]
    keep = sorted(totals, key=totals.get, reverse=True)[:top]
    fig, ax = plt.subplots(figsize=(8, 4))
    labels = [f"C={p['params']['C']}" for p in pts]
    bottom = [0.0] * len(pts)
    for name in keep + ["other", IDLE]:
        vals = []
        for p in pts:
            rows = p["extra"].get("attribution", [])
            if name == "other":
                vals.append(sum(r["gpu_ms"] for r in rows if r["op"] not in keep and r["op"] not in NOT_OPS))
            else:
                vals.append(sum(r["gpu_ms"] for r in rows if r["op"] == name))
        ax.bar(labels, vals, bottom=bottom, label=name, color="lightgray" if name == IDLE else None)
        bottom = [b + v for b, v in zip(bottom, vals)]
    ax.plot(labels, [p["median_us"] / 1e3 for p in pts], "k_", markersize=30, label="measured step")
    ax.set_ylabel("ms per step")
    ax.legend(fontsize=6, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return _png(fig, plt)


# ------------------------------------------------------------------------------------------------
# the page
# ------------------------------------------------------------------------------------------------
def build(store, gate_path: str | None = None, run_tag: str | None = None, plots: bool = True) -> list[Section]:
    from kernelbench.harness import calibrate, roofline
    plt = _plt() if plots else None
    sections: list[Section] = []
    decode = newest_decode(store, run_tag)
    env_id = decode[0]["environment_id"] if decode else None
    bench = [r for r in roofline.latest_bench(store) if r["op"] != DECODE_OP]
    if env_id is None and bench:
        env_id = bench[-1]["environment_id"]
    env = environment(store, env_id) if env_id is not None else {}
    fp = Section("Device")
    if env:
        fp.tables.append((["field", "value"], [[k, str(env.get(k, ""))] for k in FINGERPRINT_KEYS + ("git_commit",)]))
    else:
        fp.text.append("No results in this database yet.")
    sections.append(fp)
    if plots and plt is None:
        sections[0].text.append("Plots need matplotlib (pip install matplotlib); the tables follow without them.")

    sec = Section("Decode step")
    if not decode:
        sec.text.append("No decode-bench results: run `kernelbench decode-bench --device cuda --impl triton`.")
    sections.append(sec)
    if decode:
        d0 = decode[0]
        p0, e0 = d0["params"], d0["extra"]
        sec.text.append(f"{p0['config']} ({p0['layers']} layers), impl {d0['impl']}, TP{p0['tp']}"
                        f"{' (rank-0 shapes, collectives skipped)' if e0.get('simulated_tp') else ''}, "
                        f"{'CUDA graph' if e0.get('graph') else 'eager'}, commit {d0['git_commit'][:12]}, "
                        f"run {d0['run_tag']}")
        by_c = sorted((r for r in decode if r["params"].get("axis", "batch") == "batch"),
                      key=lambda r: r["params"]["C"])
        by_ctx = sorted((r for r in decode if r["params"].get("axis") == "context"),
                        key=lambda r: r["extra"].get("mean_context", 0))
        head = ["C", "context", "step ms", "q1..q3 ms", "tokens/s", "roofline ms", "% of roofline", "op rows sum"]
        for rows, what in ((by_c, "vs C"), (by_ctx, "vs context")):
            if not rows:
                continue
            body = []
            for r in rows:
                ms, roof = r["median_us"] / 1e3, r["extra"].get("roofline_ms")
                busy = op_rows_busy(r["extra"].get("attribution", []))
                body.append([str(r["params"]["C"]), str(r["params"]["context"]), f"{ms:.3f}",
                             f"{(r['q1_us'] or 0) / 1e3:.3f}..{(r['q3_us'] or 0) / 1e3:.3f}",
                             f"{r['extra'].get('tokens_per_s', 0):.1f}", "" if roof is None else f"{roof:.3f}",
                             "" if roof is None else f"{100 * roof / ms:.0f}%",
                             f"{busy:.3f} ({100 * busy / ms:.0f}%)" if busy else ""])
            sec.tables.append((head, body))
        fit = e0.get("fit") or {}
        if fit.get("b_ms") is not None:
            ci = lambda v: "" if v is None else f" ± {v:.3g}"  # noqa: E731
            sec.text.append(f"fit: step = {fit['a_ms']:.3f}{ci(fit.get('a_ci_ms'))} ms + {fit['b_ms']:.4f}"
                            f"{ci(fit.get('b_ci_ms'))} ms x C (95% CI, r2 {fit.get('r2', math.nan):.3f})")
        for f in e0.get("flags") or []:
            sec.text.append(f"FLAG: {f}")
        if plt is not None:
            if len(by_c) >= 2:
                sec.images.append(("decode_vs_c.png", scaling_plot(plt, by_c, "C", "concurrent requests C", fit)))
            if len(by_ctx) >= 2:
                sec.images.append(("decode_vs_context.png",
                                   scaling_plot(plt, by_ctx, "context", "mean context (tokens)", None)))
        prof = [r for r in by_c if r["extra"].get("attribution")]
        if prof:
            ops = Section("Where the step goes (per op, per step)")
            big = prof[-1]
            ms = big["median_us"] / 1e3
            kps = big["extra"].get("kernels_per_step", 0)
            ops.text.append(f"C={big['params']['C']}, {big['extra'].get('attribution_source', '')}; {kps:.0f} kernels "
                            f"per step, {kps / max(1, big['params']['layers']):.1f} per layer")
            ops.tables.append((["op", "calls", "ms", "share", "MB"],
                               [[a["op"], f"{a['calls']:g}", f"{a['gpu_ms']:.3f}", f"{100 * a['gpu_ms'] / ms:.1f}%",
                                 f"{a['bytes'] / 1e6:.2f}" if a["bytes"] else ""]
                                for a in big["extra"]["attribution"]]))
            if plt is not None:
                ops.images.append(("ops_stacked.png", stacked_ops_plot(plt, prof)))
            sections.append(ops)
    if decode or bench:
        sections.append(_roofline_section(store, bench, env, plt, calibrate, roofline))
    sections.append(_verify_section(store))
    sections.append(_gate_section(gate_path))
    return sections


def _roofline_section(store, bench, env, plt, calibrate, roofline) -> Section:
    sec = Section("Kernels on the roofline")
    if not bench:
        sec.text.append("No kernel bench results: run `kernelbench bench --impl triton`.")
        return sec
    device = bench[-1]["device"]
    try:
        ceil = roofline.ceilings_for(device, calibrate.load_ceilings(store, gpu_name=device))
    except ValueError as e:
        sec.text.append(str(e))
        return sec
    pts = [roofline.point(r["op"], r["impl"], r["label"], r["flops"] or 0.0, r["bytes"] or 0.0, ceil, r["median_us"])
           for r in bench if r["device"] == device and r["bytes"]]
    sec.text.append(f"{device}: {ceil.gbps:.0f} GB/s, bf16 {ceil.tflops['bf16']:.0f} / fp8 {ceil.tflops['fp8']:.0f} "
                    f"TFLOP/s ({ceil.source})")
    sec.tables.append((["op", "impl", "shape", "us", "floor us", "% of roof", "flag"],
                       [[p.op, p.impl, p.label, f"{p.median_us:.2f}", f"{p.floor_us:.2f}",
                         "" if p.fraction is None else f"{100 * p.fraction:.0f}%", p.flag] for p in pts]))
    if plt is not None and pts:
        import tempfile
        with tempfile.TemporaryDirectory() as tmp:
            path = roofline.plot(pts, ceil, str(Path(tmp) / "roofline.png"))
            sec.images.append(("roofline.png", Path(path).read_bytes()))
    return sec


def _verify_section(store) -> Section:
    sec = Section("Verify status")
    rows = verify_status(store)
    if not rows:
        sec.text.append("No verify results: run `kernelbench verify`.")
        return sec
    failed = [r for r in rows if r["failed"]]
    sec.text.append(f"{len(rows) - len(failed)} of {len(rows)} implementations passed their newest verify run")
    sec.tables.append((["op", "impl", "verdict", "examples", "failed", "device", "commit"],
                       [[r["op"], r["impl"], "FAIL" if r["failed"] else "pass", str(r["examples"]), str(r["failed"]),
                         r["device"], (r["git_commit"] or "")[:12]] for r in rows]))
    return sec


def _gate_section(gate_path: str | None) -> Section:
    sec = Section("Gate")
    if not gate_path:
        sec.text.append("No gate result given (--gate FILE from `kernelbench gate --json FILE`).")
        return sec
    try:
        g = json.loads(Path(gate_path).read_text())
        passed, findings = bool(g["passed"]), list(g.get("findings", []))
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise ReportError(f"--gate {gate_path}: not a `kernelbench gate --json` file ({e})") from None
    sec.text.append(f"verdict: {'PASS' if passed else 'FAIL'} ({len(findings)} findings)")
    if findings:
        keys = [k for k in ("kind", "op", "impl", "label", "detail", "fatal") if any(k in f for f in findings)]
        sec.tables.append((keys, [[str(f.get(k, "")) for k in keys] for f in findings]))
    return sec


def render_html(sections: list[Section], title: str = "kernelbench report") -> str:
    out = [f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title><style>"
           "body{font-family:sans-serif;max-width:1100px;margin:2em auto}table{border-collapse:collapse;margin:.5em 0}"
           "td,th{border:1px solid #ccc;padding:2px 8px;text-align:right}td:first-child,th:first-child{text-align:left}"
           "</style></head><body>", f"<h1>{html.escape(title)}</h1>"]
    for s in sections:
        out.append(f"<h2>{html.escape(s.title)}</h2>")
        out += [f"<p>{html.escape(t)}</p>" for t in s.text]
        for head, body in s.tables:
            out.append("<table><tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in head) + "</tr>")
            out += ["<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in body]
            out.append("</table>")
        for name, png in s.images:
            out.append(f"<img alt='{html.escape(name)}' src='data:image/png;base64,{base64.b64encode(png).decode()}'>")
    out.append("</body></html>")
    return "\n".join(out)


def render_markdown(sections: list[Section], image_dir: Path, title: str = "kernelbench report") -> str:
    out = [f"# {title}", ""]
    for s in sections:
        out += [f"## {s.title}", ""] + [t + "\n" for t in s.text]
        for head, body in s.tables:
            out.append("| " + " | ".join(head) + " |")
            out.append("|" + "---|" * len(head))
            out += ["| " + " | ".join(c.replace("|", "/") for c in row) + " |" for row in body]
            out.append("")
        for name, png in s.images:
            (image_dir / name).write_bytes(png)
            out += [f"![{name}]({name})", ""]
    return "\n".join(out)


def write(sections: list[Section], path: str) -> str:
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    if p.suffix.lower() in (".md", ".markdown"):
        p.write_text(render_markdown(sections, p.parent))
    elif p.suffix.lower() in (".html", ".htm"):
        p.write_text(render_html(sections))
    else:
        raise ReportError(f"--out {path}: write .html (one self-contained file) or .md (with PNGs beside it)")
    return str(p)
