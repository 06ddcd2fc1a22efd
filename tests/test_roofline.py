"""Rooflines from datasheet or calibrated ceilings, the bound and achieved fraction of each point,
the plot, and the history of an op across commits, read back from a real database."""
import pytest
from click.testing import CliRunner

from kernelbench.harness import calibrate, devices, history
from kernelbench import registry
from kernelbench.harness import roofline as rl
from kernelbench.db.store import Store


@pytest.fixture
def store(tmp_path):
    s = Store(f"sqlite:///{tmp_path / 'kb.sqlite'}")
    yield s
    s.dispose()


def test_datasheet_rows_and_aliases():
    pro = devices.get("rtx-pro-6000")
    assert pro.arch == 120 and pro.smem_per_block == 101376 and pro.sms == 188
    assert devices.find("NVIDIA H200").bandwidth_gbps == 4800
    assert devices.find("NVIDIA H200 NVL").name == "NVIDIA H200"
    assert devices.find("NVIDIA RTX PRO 6000 Blackwell Server Edition").arch == 120
    assert devices.find("Quadro K5000") is None
    with pytest.raises(KeyError, match="no datasheet row"):
        devices.get("Quadro K5000")


def test_ceilings_prefer_calibration_and_say_so():
    sheet = rl.ceilings_for("rtx-pro-6000")
    assert sheet.source == "datasheet" and sheet.gbps == 1792 and sheet.peak("fp8_linear") == 1000
    mixed = rl.ceilings_for("NVIDIA H200", {"copy_gbps": 4250.0, "bf16_tflops": 679.0})
    assert mixed.gbps == 4250 and mixed.tflops == {"bf16": 679.0, "fp8": 1979} and mixed.source == "calibrated+datasheet"
    with pytest.raises(ValueError, match="calibrate"):
        rl.ceilings_for("Quadro K5000")


def test_points_bound_floor_and_fraction():
    ceil = rl.ceilings_for("NVIDIA H200", {"copy_gbps": 4000.0, "bf16_tflops": 800.0, "fp8_tflops": 1600.0})
    spec = registry.get_op("fp8_linear")
    p = {"M": 16, "N": 2048, "K": 4096}
    c = spec.cost(p)
    gemv = rl.point("fp8_linear", "triton", "w1", c.flops, c.bytes, ceil, median_us=10.0)
    assert gemv.bound == "memory" and gemv.floor_us == pytest.approx(c.bytes / 4000e3)
    assert gemv.fraction == pytest.approx(gemv.floor_us / 10.0) and gemv.flag == ""
    big = rl.point("bf16_linear", "x", "8192^3", 2 * 8192 ** 3, 3 * 2 * 8192 ** 2, ceil, median_us=1500.0)
    assert big.bound == "compute" and big.floor_us == pytest.approx(2 * 8192 ** 3 / 800e6)
    impossible = rl.point("fp8_linear", "triton", "w1", c.flops, c.bytes, ceil, median_us=gemv.floor_us / 2)
    assert "measurement error" in impossible.flag


def test_plot_and_table(tmp_path):
    ceil = rl.ceilings_for("rtx-pro-6000")
    pts = [rl.point("fp8_linear", "triton", "M=16", 1.3e8, 8.6e6, ceil, 9.0),
           rl.point("rms_norm", "triton", "M=16", 2.6e5, 2.6e5, ceil, 3.0),
           rl.point("sparse_attention", "-", "T=16", 6e8, 4e7, ceil)]
    path = rl.plot(pts, ceil, str(tmp_path / "roof.png"))
    data = open(path, "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000
    from rich.console import Console
    con = Console(width=250, record=True)
    con.print(rl.table(pts, ceil))
    text = con.export_text()
    assert "fp8_linear" in text and "memory" in text and "datasheet" in text


def add_bench(store, env, impl_id, commit, tag, med, label="M=16"):
    store.add_bench_results([dict(environment_id=env, implementation_id=impl_id, shape_label=label,
                                  params={"M": 16, "N": 2048, "K": 4096}, config={}, method="graph", median_us=med,
                                  q1_us=med * 0.98, q3_us=med * 1.02, flops=2.7e8, bytes=8.6e6,
                                  git_commit=commit, run_tag=tag)])


def test_database_roundtrip_roofline_history_and_calibration(store, tmp_path):
    env = store.environment_id({"device_type": "cuda", "gpu_name": "NVIDIA H200", "compute_capability": "9.0"})
    impl = store.op_impl_id("fp8_linear", "triton", "h1", backend="triton")
    add_bench(store, env, impl, "c1", "r1", 12.0)
    add_bench(store, env, impl, "c2", "r2", 9.0)
    add_bench(store, env, impl, "c2", "r3", 8.5)         # a re-run of c2: the newest stands for it
    store.add_calibrations([dict(environment_id=env, measure="copy_gbps", value=4250.0, unit="GB/s", samples=[1.0])])
    assert calibrate.load_ceilings(store, env) == {"copy_gbps": 4250.0}
    assert calibrate.load_ceilings(store, gpu_name="NVIDIA H200") == {"copy_gbps": 4250.0}
    rows = rl.latest_bench(store, "NVIDIA H200")
    assert [r["median_us"] for r in rows] == [8.5]
    commits, series = history.load(store, "fp8_linear", "NVIDIA H200")
    assert commits == ["c1", "c2"] and [p[2] for p in series[0].points] == [12.0, 8.5]
    png = history.plot("fp8_linear", commits, series, str(tmp_path / "h.png"))
    assert open(png, "rb").read(4) == b"\x89PNG"
    from kernelbench.cli import main
    db = f"sqlite:///{tmp_path / 'kb.sqlite'}"
    r = CliRunner().invoke(main, ["history", "fp8_linear", "--db", db])
    assert r.exit_code == 0 and "c1" in r.output and "-29.2%" in r.output
    r = CliRunner().invoke(main, ["roofline", "--device", "NVIDIA H200", "--db", db, "--png", str(tmp_path / "r.png")])
    assert r.exit_code == 0 and "calibrated+datasheet" in r.output and (tmp_path / "r.png").exists()
    r = CliRunner().invoke(main, ["history", "rms_norm", "--db", db])
    assert r.exit_code != 0 and "no bench results" in r.output


def test_a_corrupt_database_is_a_clear_error(tmp_path):
    from kernelbench.cli import main
    bad = tmp_path / "kb.sqlite"
    bad.write_bytes(b"this is not a database" * 100)
    for args in (["history", "fp8_linear"], ["roofline", "--device", "h200"], ["gate", "--current", "db:latest"]):
        r = CliRunner().invoke(main, args + ["--db", f"sqlite:///{bad}"])
        assert r.exit_code != 0 and "corrupt" in r.output, (args, r.output)


def test_plot_without_matplotlib_says_which_extra(monkeypatch, tmp_path):
    import sys

    from kernelbench.extras import MissingExtra
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(MissingExtra, match=r"pip install 'kernelbench\[plot\]'"):
        history.plot("fp8_linear", [], [], str(tmp_path / "h.png"))
