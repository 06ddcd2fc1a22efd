"""The CI regression gate: slowdowns beyond noise fail, noise does not; verification failures, lost
tensor-core instructions and sm_120 overflows fail; sources are bench JSON files or the database."""
import json

import pytest
from click.testing import CliRunner

from kernelbench.harness import gate as g
from kernelbench.commands.gate import command as gate_cmd
from kernelbench.db.store import Store


def row(median, q1, q3, op="fp8_linear", impl="triton", M=16, verified=True, **kw):
    return {"device": "NVIDIA H200", "op": op, "impl": impl, "label": f"M={M}", "params": {"M": M, "N": 1024},
            "config": kw.get("config", {}), "median_us": median, "q1_us": q1, "q3_us": q3, "verified": verified}


def write(path, rows):
    path.write_text(json.dumps({"device": "NVIDIA H200", "results": rows}))
    return str(path)


def kinds(findings, fatal=True):
    return sorted(f.kind for f in findings if f.fatal == fatal)


def test_slowdown_beyond_the_iqr_fails_and_noise_does_not():
    base = [row(10.0, 9.8, 10.2)]
    assert kinds(g.compare_bench(base, [row(11.0, 10.8, 11.3)])) == ["slowdown"]
    # +8% median but the spreads overlap: noise
    assert kinds(g.compare_bench(base, [row(10.8, 10.0, 11.9)])) == []
    # disjoint spreads but under the tolerance: not a regression either
    assert kinds(g.compare_bench(base, [row(10.3, 10.25, 10.35)]), True) == []
    # a faster run is reported, not fatal
    assert kinds(g.compare_bench(base, [row(8.0, 7.9, 8.1)]), False) == ["improved"]
    # a different config is a different result: compared with nothing
    assert kinds(g.compare_bench(base, [row(20.0, 19.9, 20.1, config={"BLOCK": 64})])) == []


def test_verification_failures_and_missing_results():
    base = [row(10.0, 9.8, 10.2), row(5.0, 4.9, 5.1, M=64)]
    cur = [row(10.0, 9.9, 10.1, verified=False)]
    f = g.compare_bench(base, cur)
    assert kinds(f) == ["verify"]
    assert kinds(f, False) == ["missing"]
    assert kinds(g.compare_bench(base, cur, strict=True)) == ["missing", "verify"]


def inspect_report(op, tc, smem=40000, problems=()):
    return {"op": op, "impl": "triton", "label": "M=16", "params": {"M": 16}, "config": {},
            "kernels": [{"kernel": "k:gemm", "tensor_cores": tc, "shared_bytes": smem}], "problems": list(problems)}


def test_lost_tensor_cores_and_sm120_problems_fail():
    base = [inspect_report("bf16_linear", True), inspect_report("rms_norm", False)]
    cur = [inspect_report("bf16_linear", False), inspect_report("rms_norm", False)]
    f = g.compare_inspect(cur, base)
    assert kinds(f) == ["tensor_cores"] and "k:gemm" in f[0].detail
    over = [inspect_report("bf16_linear", True, 120000,
                           ["k:gemm: 120000 bytes of shared memory > 101376"])]
    f = g.compare_inspect(over, base)
    assert kinds(f) == ["sm120"] and kinds(f, False) == ["smem_growth"]
    # an op that must use tensor cores reports it once, through the inspector's problem
    need = [inspect_report("fp8_linear", False, problems=["no tensor-core instruction (mma/wgmma, HMMA/QMMA/OMMA) in any kernel"])]
    assert kinds(g.compare_inspect(need, [inspect_report("fp8_linear", True)])) == ["tensor_cores"]


def test_shared_memory_growth_compares_launch_by_launch():
    """A kernel launched twice with other tile sizes (the MoE GEMM's up and down passes) is compared with its
    own launch in the baseline: unchanged launches report nothing, a grown second launch is reported."""
    def twice(up, down):
        return [{"op": "moe_layer", "impl": "triton", "label": "T=1", "params": {"T": 1}, "config": {},
                 "kernels": [{"kernel": "k:grouped", "tensor_cores": True, "shared_bytes": up},
                             {"kernel": "k:grouped", "tensor_cores": True, "shared_bytes": down}], "problems": []}]
    assert g.compare_inspect(twice(36864, 20480), twice(36864, 20480)) == []
    f = g.compare_inspect(twice(36864, 24576), twice(36864, 20480))
    assert kinds(f, False) == ["smem_growth"] and "20480 -> 24576" in f[0].detail


def test_fewer_programs_an_sm_are_reported_launch_by_launch():
    """A launch that holds fewer programs an SM than in the baseline (more shared memory or registers: less to
    hide latencies with on the card) is reported, not fatal; equal or more is not; a baseline row from before the
    inspector gave the count (no programs_per_sm) compares nothing; a launch that no longer fits (0) is left to its
    sm_120 problem."""
    def rep(*per_sm):
        return [{"op": "sparse_attention", "impl": "triton", "label": "T=1", "params": {"T": 1}, "config": {},
                 "kernels": [{"kernel": "k:split", "tensor_cores": True, "shared_bytes": 50304, **(
                     {"programs_per_sm": n} if n is not None else {})} for n in per_sm], "problems": []}]
    assert g.compare_inspect(rep(2, 1), rep(2, 1)) == [] and g.compare_inspect(rep(2, 2), rep(2, 1)) == []
    f = g.compare_inspect(rep(2, 1), rep(2, 2))
    assert kinds(f, False) == ["occupancy"] and kinds(f) == [] and "programs an SM 2 -> 1" in f[0].detail
    assert g.compare_inspect(rep(1, 1), rep(None, None)) == []
    assert g.compare_inspect(rep(0, 1), rep(2, 1)) == []


def test_cli_exit_codes_and_markdown(tmp_path):
    base = write(tmp_path / "base.json", [row(10.0, 9.8, 10.2)])
    good = write(tmp_path / "good.json", [row(10.1, 9.9, 10.3)])
    bad = write(tmp_path / "bad.json", [row(12.0, 11.9, 12.2)])
    runner = CliRunner()
    r = runner.invoke(gate_cmd, ["--baseline", base, "--current", good])
    assert r.exit_code == 0 and "PASSED" in r.output
    md = tmp_path / "summary.md"
    r = runner.invoke(gate_cmd, ["--baseline", base, "--current", bad, "--markdown", str(md)])
    assert r.exit_code == 1 and "slowdown" in md.read_text()
    (tmp_path / "junk.json").write_text("{oops")
    r = runner.invoke(gate_cmd, ["--baseline", base, "--current", str(tmp_path / "junk.json")])
    assert r.exit_code != 0 and "not valid JSON" in r.output


def test_database_sources(tmp_path):
    store = Store(f"sqlite:///{tmp_path / 'kb.sqlite'}")
    env = store.environment_id({"device_type": "cuda", "gpu_name": "NVIDIA H200", "compute_capability": "9.0"})
    impl = store.op_impl_id("fp8_linear", "triton", "abc", backend="triton")
    for commit, tag, med in (("aaa111", "r1", 10.0), ("bbb222", "r2", 13.0)):
        store.add_bench_results([dict(environment_id=env, implementation_id=impl, shape_label="M=16",
                                      params={"M": 16, "N": 1024}, config={}, method="graph", median_us=med,
                                      q1_us=med - 0.1, q3_us=med + 0.1, git_commit=commit, run_tag=tag,
                                      extra={"verified": True})])
    assert [r["median_us"] for r in g.load_bench("db:commit=aaa", store)] == [10.0]
    assert [r["median_us"] for r in g.load_bench("db:latest", store)] == [13.0]
    assert [r["median_us"] for r in g.load_bench("db:tag=r2,device=NVIDIA H200", store)] == [13.0]
    f = g.compare_bench(g.load_bench("db:commit=aaa", store), g.load_bench("db:latest", store))
    assert kinds(f) == ["slowdown"]
    with pytest.raises(ValueError, match="no bench results"):
        g.load_bench("db:commit=zzz", store)
    with pytest.raises(ValueError, match="selector"):
        g.load_bench("db:branch=main", store)
    r = CliRunner().invoke(gate_cmd, ["--baseline", "db:commit=aaa", "--current", "db:latest", "--db",
                                      f"sqlite:///{tmp_path / 'kb.sqlite'}"])
    assert r.exit_code == 1 and "slowdown" in r.output
    store.dispose()


def test_a_bench_runs_rows_reach_the_gate_through_the_store(tmp_path):
    """harness/bench.BenchRun.keep stores a measurement (the row `kernelbench bench` writes) and its --json
    file; the gate reads the same row back from the database and from the file."""
    from kernelbench import registry
    from kernelbench.harness.bench import BenchRun
    from kernelbench.harness.timing import Measurement, Summary
    store = Store(f"sqlite:///{tmp_path / 'kb.sqlite'}")
    env = store.environment_id({"device_type": "cuda", "gpu_name": "NVIDIA H200", "compute_capability": "9.0"})
    run = BenchRun(store, env, "NVIDIA H200", "abc123", "r1")
    impl = registry.get_impl("rms_norm", "triton")
    m = Measurement("rms_norm", "triton", {"M": 16, "N": 4096}, "M=16,N=4096", {"BLOCK": 128}, "graph",
                    Summary(5.0, 4.9, 5.2, 5.05, 0.004, 40, [5.0] * 40), 2.6e5, 2.6e5, 8, 2 ** 20, False, 32, None,
                    True, "", None)
    run.keep(impl, m)
    run.write(str(tmp_path / "bench.json"))
    assert run.roofline_point(m) is None          # no ceilings given
    (db_row,) = g.load_bench("db:latest", store)
    (file_row,) = g.load_bench(str(tmp_path / "bench.json"))
    for r in (db_row, file_row):
        assert (r["device"], r["op"], r["impl"], r["params"], r["config"], r["median_us"], r["git_commit"]) == \
            ("NVIDIA H200", "rms_norm", "triton", {"M": 16, "N": 4096}, {"BLOCK": 128}, 5.0, "abc123")
    assert g.row_key(db_row) == g.row_key(file_row)
