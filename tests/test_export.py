"""`kernelbench export`: a bench run from the database (SQLite and PostgreSQL) in each standard format,
validated against the format's documented shape, and the pytest-benchmark file read back by
pytest-benchmark itself."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest
from click.testing import CliRunner

from kernelbench.cli import main
from kernelbench.db import schema
from kernelbench.db.store import Store

jsonschema = pytest.importorskip("jsonschema", reason="format validation needs jsonschema (kernelbench[test])")

# Bencher Metric Format, as its reference documents it (JSON Schema draft-07): benchmark -> measure -> metric.
BMF_SCHEMA = {
    "$schema": "http://json-schema.org/draft-07/schema", "type": "object",
    "patternProperties": {".+": {
        "type": "object",
        "patternProperties": {".+": {
            "type": "object", "required": ["value"],
            "properties": {"value": {"type": "number"}, "lower_value": {"type": "number"},
                           "upper_value": {"type": "number"}}}}}}}
# github-action-benchmark's custom tools (customSmallerIsBetter): a list of {name, unit, value}, with
# optional string `range` and `extra`.
GAB_SCHEMA = {
    "$schema": "http://json-schema.org/draft-07/schema", "type": "array", "minItems": 1,
    "items": {"type": "object", "required": ["name", "unit", "value"], "additionalProperties": False,
              "properties": {"name": {"type": "string"}, "unit": {"type": "string"}, "value": {"type": "number"},
                             "range": {"type": "string"}, "extra": {"type": "string"}}}}

SAMPLES = [9.0, 10.0, 11.0, 12.0, 13.0]


def _fill(url: str) -> None:
    store = Store(url)
    env = store.environment_id({"device_type": "cuda", "gpu_name": "NVIDIA H200", "compute_capability": "9.0"})
    lin = store.op_impl_id("fp8_linear", "triton", "h1", backend="triton")
    norm = store.op_impl_id("rms_norm", "triton", "h2", backend="triton")
    rows = [("old", lin, "M=16", {}, [50.0, 60.0]), ("new", lin, "M=16", {}, SAMPLES),
            ("new", lin, "M=16", {"BLOCK_N": 64}, [20.0, 21.0]), ("new", norm, "M=4,N=4096", {}, [3.0, 3.5, 4.0])]
    with store.session() as s:
        for tag, impl, label, cfg, xs in rows:
            xs_sorted = sorted(xs)
            med = xs_sorted[len(xs) // 2] if len(xs) % 2 else sum(xs_sorted[len(xs) // 2 - 1:len(xs) // 2 + 1]) / 2
            s.add(schema.BenchResult(environment_id=env, implementation_id=impl, shape_label=label, params={"M": 16},
                                     config=cfg, method="graph", median_us=med, q1_us=min(xs), q3_us=max(xs),
                                     n=len(xs), samples=xs, git_commit="abc123", run_tag=tag))


def _export(url: str, fmt: str, *args: str):
    res = CliRunner().invoke(main, ["export", "--format", fmt, "--db", url, *args])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def test_bencher_metric_format(db_url):
    _fill(db_url)
    doc = _export(db_url, "bencher")
    jsonschema.validate(doc, BMF_SCHEMA)
    assert set(doc) == {"fp8_linear/triton M=16", 'fp8_linear/triton M=16 {"BLOCK_N":64}', "rms_norm/triton M=4,N=4096"}
    assert doc["fp8_linear/triton M=16"]["latency"] == {"value": 11_000.0, "lower_value": 9_000.0, "upper_value": 13_000.0}


def test_github_action_benchmark_custom_smaller_is_better(db_url):
    _fill(db_url)
    doc = _export(db_url, "github-action-benchmark", "--run-tag", "old")
    jsonschema.validate(doc, GAB_SCHEMA)
    assert [(d["name"], d["unit"], d["value"]) for d in doc] == [("fp8_linear/triton M=16", "us", 55.0)]
    doc = _export(db_url, "github-action-benchmark", "--op", "rms_norm")
    jsonschema.validate(doc, GAB_SCHEMA)
    assert [(d["name"], d["value"], d["range"]) for d in doc] == [("rms_norm/triton M=4,N=4096", 3.5, "± 0.5")]


def test_pytest_benchmark_json_is_read_by_pytest_benchmark(tmp_path):
    pytest.importorskip("pytest_benchmark")
    url = f"sqlite:///{tmp_path / 'kb.sqlite'}"
    _fill(url)
    doc = _export(url, "pytest-benchmark")
    (b,) = [b for b in doc["benchmarks"] if b["name"] == "fp8_linear/triton M=16"]
    assert b["stats"]["data"] == pytest.approx([s * 1e-6 for s in SAMPLES])
    assert b["stats"]["median"] == pytest.approx(11e-6) and b["stats"]["rounds"] == 5
    assert {"machine_info", "commit_info", "benchmarks", "datetime", "version"} <= set(doc)
    path = tmp_path / "0001_kb.json"
    path.write_text(json.dumps(doc))
    r = subprocess.run([sys.executable, "-m", "pytest_benchmark", "compare", str(path), "--columns=median,rounds"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "fp8_linear/triton M=16" in r.stdout and "rms_norm/triton M=4,N=4096" in r.stdout


def test_empty_database_and_unknown_run_are_clear_errors(tmp_path):
    url = f"sqlite:///{tmp_path / 'kb.sqlite'}"
    res = CliRunner().invoke(main, ["export", "--format", "bencher", "--db", url])
    assert res.exit_code == 1 and "no bench results for any run" in res.output
    _fill(url)
    res = CliRunner().invoke(main, ["export", "--format", "bencher", "--db", url, "--run-tag", "nope"])
    assert res.exit_code == 1 and "no bench results for run 'nope'" in res.output
