"""`kernelbench report` from a small database the test fills: a decode-bench run (with attribution),
kernel bench rows, verify runs (one kernel failing in its newest run), a gate verdict."""
import json

import pytest
from click.testing import CliRunner

from kernelbench.decoder import decode_bench as db
from kernelbench.harness import report
from kernelbench.cli import main
from kernelbench.db.store import Store


def _fill(url: str) -> Store:
    store = Store(url)
    fp = {"device_type": "cuda", "gpu_name": "NVIDIA H200", "compute_capability": "9.0", "sm_count": 132,
          "torch": "2.x", "triton": "3.x", "python": "3.11", "hostname": "box", "cpu": "x", "cuda": "12",
          "driver": "570", "git_commit": "abc"}
    env = store.environment_id(fp)
    res = db.BenchResult("flash", "triton", "cuda:0", 8, True, "512", 600, True, layers=43, gbps=4800.0)
    for c, ms in ((1, 13.0), (16, 19.5), (64, 32.1)):
        attribution = [{"op": "moe_experts", "calls": 43, "gpu_ms": ms * 0.6, "bytes": 3e9},
                       {"op": "sparse_attention", "calls": 43, "gpu_ms": ms * 0.3, "bytes": 1e8},
                       {"op": db.IDLE, "calls": 0, "gpu_ms": ms * 0.1, "bytes": 0.0}]
        res.points.append(db.BenchPoint(c, 512, ms, ms * 0.98, ms * 1.02, ms * 0.99, ms * 1.01, 1e3 * c / ms,
                                        roofline_ms=0.8 + 0.05 * c, bytes=4e9, kernels_per_step=1800,
                                        attribution=attribution, attribution_source="graph replay kernels",
                                        samples_ms=[ms] * 3))
    res.context_points = [db.BenchPoint(1, ctx, 13 + ctx / 1e4, 13, 17, 13, 17, 70, roofline_ms=0.9,
                                        samples_ms=[13.0]) for ctx in (512, 32768)]
    db._analyse(res)
    assert db.store_result(store, env, res, "decode:t1", "abc") == 5
    impl_ok = store.op_impl_id("rms_norm", "triton", "h1")
    impl_bad = store.op_impl_id("fp8_linear", "triton", "h2")
    old = store.start_verify_run(env, device="cuda", git_commit="abc")
    store.add_verify_result(old, impl_bad, params={}, value_mode="normal", passed=True, stats={})
    new = store.start_verify_run(env, device="cuda", git_commit="abd")
    for impl, passed in ((impl_ok, True), (impl_ok, True), (impl_bad, True), (impl_bad, False)):
        store.add_verify_result(new, impl, params={}, value_mode="normal", passed=passed, stats={})
    store.add_bench_results([dict(environment_id=env, implementation_id=impl_ok, shape_label="T=64", params={"T": 64},
                                  config={}, method="graph", median_us=5.0, flops=1e6, bytes=4e6, git_commit="abc",
                                  run_tag="b1")])
    return store


def test_report_html_and_markdown_from_a_small_database(tmp_path):
    url = f"sqlite:///{tmp_path / 'kb.sqlite'}"
    _fill(url)
    gate = tmp_path / "gate.json"
    gate.write_text(json.dumps({"passed": False, "findings": [{"kind": "slowdown", "op": "fp8_linear", "fatal": True}]}))
    out = tmp_path / "r.html"
    r = CliRunner().invoke(main, ["report", "--db", url, "--out", str(out), "--gate", str(gate)])
    assert r.exit_code == 0, r.output
    page = out.read_text()
    assert "NVIDIA H200" in page and "flash (43 layers)" in page
    assert f"{1e3 * 64 / 32.1:.1f}" in page                                        # tokens/s at C=64
    assert "1 of 2 implementations passed" in page and "FAIL" in page              # fp8_linear's newest run failed
    assert "verdict: FAIL (1 findings)" in page and "slowdown" in page
    assert page.count("data:image/png;base64,") == 4        # vs C, vs context, per-op bars, roofline
    assert "moe_experts" in page and "% of roofline" in page and "± " in page
    md = tmp_path / "md" / "r.md"
    r = CliRunner().invoke(main, ["report", "--db", url, "--out", str(md), "--no-plots"])
    assert r.exit_code == 0, r.output
    text = md.read_text()
    assert "| 64 | 512 | 32.100 |" in text and "![" not in text and "No gate result" in text


def test_report_without_matplotlib_keeps_the_tables(tmp_path, monkeypatch):
    store = _fill(f"sqlite:///{tmp_path / 'kb.sqlite'}")
    monkeypatch.setattr(report, "_plt", lambda: None)
    page = report.render_html(report.build(store))
    assert "Plots need matplotlib" in page and "data:image" not in page and "32.100" in page


def test_report_errors_are_one_line(tmp_path):
    url = f"sqlite:///{tmp_path / 'kb.sqlite'}"
    _fill(url)
    bad = tmp_path / "g.json"
    bad.write_text("[1, 2]")
    for args, why in ((["--gate", str(bad)], "not a `kernelbench gate --json` file"),
                      (["--out", str(tmp_path / "r.pdf")], ".html"), (["--run-tag", "nope"], "run tag")):
        r = CliRunner().invoke(main, ["report", "--db", url, "--no-plots", *args] +
                               ([] if "--out" in args else ["--out", str(tmp_path / "x.html")]))
        assert r.exit_code == 1 and why in r.output and "Traceback" not in r.output, r.output
    empty = CliRunner().invoke(main, ["report", "--db", f"sqlite:///{tmp_path / 'e.sqlite'}", "--out",
                                      str(tmp_path / "e.html")])
    assert empty.exit_code == 0 and "No decode-bench results" in (tmp_path / "e.html").read_text()


def test_newest_decode_run_is_chosen(tmp_path):
    store = _fill(f"sqlite:///{tmp_path / 'kb.sqlite'}")
    assert {r["run_tag"] for r in report.newest_decode(store)} == {"decode:t1"}
    with pytest.raises(report.ReportError):
        report.newest_decode(store, "decode:other")
