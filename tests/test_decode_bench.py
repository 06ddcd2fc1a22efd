"""decode-bench's pure parts (layer sets, contexts, attribution, bytes) and the command on the CPU with
the reference ops (the Triton decoder in the interpreter is too slow for the default run)."""
import json
import math
import os
import statistics

import pytest
import torch
from click.testing import CliRunner

from kernelbench.decoder import decode_bench as db
from kernelbench.decoder.lanes import kv_lane_from_env
from kernelbench.cli import main
from kernelbench.config import FLASH, PRO, TINY
from kernelbench.kernels.common import pdl_on
from kernelbench.kernels.moe import SHARED_SIDE_MIN_T


# ---- layer sets --------------------------------------------------------------------------------
def test_full_depth_layer_sets_follow_the_config():
    cfg = db.bench_config("flash", "flash")
    assert cfg.n_layers == 43 and cfg.compress_ratios == FLASH.compress_ratios[:43]
    assert cfg.n_hash_layers == 3 and cfg.n_mtp_layers == 0
    assert [cfg.layer_kind(i) for i in range(43)].count("csa") == 21
    mtp = db.bench_config("flash", "flash", mtp=True)
    assert mtp.n_mtp_layers == 1 and mtp.compress_ratios == FLASH.compress_ratios
    pro = db.bench_config("pro", "pro")
    assert pro.n_layers == 61 and pro.compress_ratios == PRO.compress_ratios[:61] and pro.dim == 7168
    short = db.bench_config("flash", "short")
    assert short.compress_ratios == (0, 4, 128, 4) and short.n_hash_layers == 1
    assert db.bench_config("tiny", "swa,hca").compress_ratios == (0, 8)     # tiny's HCA ratio
    assert db.bench_config("tiny", "tiny").compress_ratios == TINY.compress_ratios[:TINY.n_layers]
    for bad in ("swa,mla", "", "flashy"):
        with pytest.raises(db.BenchError, match="--layers"):
            db.bench_config("flash", bad)


# ---- contexts ----------------------------------------------------------------------------------
def test_context_fixed_range_and_file(tmp_path):
    assert db.parse_context("512").lengths(3) == [512, 512, 512]
    spec = db.parse_context("512:65536")
    a = spec.lengths(64, seed=1)
    assert a == spec.lengths(64, seed=1) and a != spec.lengths(64, seed=2)        # seeded
    assert min(a) >= 512 and max(a) <= 65536 and spec.max_len == 65536
    logs = [math.log(v) for v in a]                 # log-uniform: the median log sits near the middle
    assert abs(sorted(logs)[32] - (math.log(512) + math.log(65536)) / 2) < 1.2
    f = tmp_path / "lens.txt"
    f.write_text("100, 200\n300\n")
    spec = db.parse_context(f"@{f}")
    assert spec.lengths(5) == [100, 200, 300, 100, 200] and spec.max_len == 300


@pytest.mark.parametrize("text,why", [("-1", ">= 1"), ("0", ">= 1"), ("abc", "not an integer"),
                                      ("900:100", "above"), ("5:x", "not an integer"), ("@/nonexistent/x", "cannot read")])
def test_context_errors_are_one_line(text, why):
    with pytest.raises(db.BenchError, match=why) as e:
        db.parse_context(text)
    assert "\n" not in str(e.value)


# ---- attribution -------------------------------------------------------------------------------
def test_attribution_groups_kernels_by_innermost_range_over_steps():
    # two steps; per step: rms_norm [0,10) launches 1 kernel; moe_layer [20,60) holds a nested
    # moe_gate [25,30) (1 kernel) and launches 2 of its own; one kernel launched outside any op range
    ranges, kernels = [], []
    for s in range(2):
        o = 1000 * s
        ranges += [db.Range("rms_norm", o + 0, o + 10), db.Range("moe_layer", o + 20, o + 60),
                   db.Range("moe_gate", o + 25, o + 30)]
        kernels += [db.Kernel("norm_k", 4_000, o + 5), db.Kernel("gate_k", 2_000, o + 26),
                    db.Kernel("up_k", 10_000, o + 35), db.Kernel("down_k", 6_000, o + 59),
                    db.Kernel("add_k", 1_000, o + 70), db.Kernel("replayed", 500, None)]
    rows = db.attribute(ranges, kernels, steps=2, op_bytes={"moe_layer": 1e6}, step_ms=0.03)
    by = {r.op: r for r in rows}
    assert len(by) == len(rows)                                          # no duplicated rows
    assert by["moe_layer"].gpu_ms == pytest.approx(0.016) and by["moe_layer"].kernels == 2
    assert by["moe_gate"].gpu_ms == pytest.approx(0.002) and by["moe_gate"].calls == 1
    assert by["rms_norm"].gpu_ms == pytest.approx(0.004)
    assert by[db.OUTSIDE].gpu_ms == pytest.approx(0.0015) and by[db.OUTSIDE].calls == 0
    assert by["moe_layer"].bytes == 1e6
    busy = sum(r.gpu_ms for r in rows if r.op != db.IDLE)
    assert busy == pytest.approx(sum(k.dur for k in kernels) / 1e6 / 2)  # every kernel counted once
    assert rows[-1].op == db.IDLE and rows[-1].gpu_ms == pytest.approx(0.03 - busy)
    assert rows[0].op == "moe_layer"                                     # sorted by time
    assert db.Row("x", 1, 2.0, 3.0, 4.0).as_json() == {"op": "x", "calls": 1, "gpu_ms": 2.0, "bytes": 3.0, "kernels": 4.0,
                                                       "by_kernel": []}
    with pytest.raises(ValueError):
        db.attribute(ranges, kernels, steps=0)


def test_attribution_splits_an_op_by_the_place_of_each_kernel_in_its_calls():
    """--kernels: one kernel function launched twice per call (the grouped GEMM's up and down launches) gives two
    rows, slot 0 and slot 1, whatever order the profiler lists the kernels in; a nested op's kernel counts in its own
    range, not in the outer op's slots; graph-replayed kernels take the eager kernel's slot with its op; the JSON row
    carries them and the table prints them."""
    ranges, kernels = [], []
    for s in range(2):
        o = 1000 * s
        ranges += [db.Range("moe_layer", o + 20, o + 60), db.Range("moe_gate", o + 21, o + 30)]
        kernels += [db.Kernel("gemm", 7_000 + s, o + 50), db.Kernel("gate_k", 2_000, o + 25),
                    db.Kernel("gemm", 10_000, o + 35)]                 # listed out of launch order
    rows = {r.op: r for r in db.attribute(ranges, kernels, steps=2)}
    moe = rows["moe_layer"].by_kernel
    assert [(k["slot"], k["name"], k["count"]) for k in moe] == [(0, "gemm", 1), (1, "gemm", 1)]
    assert moe[0]["gpu_ms"] == pytest.approx(0.010) and moe[1]["gpu_ms"] == pytest.approx(0.0070005)
    assert rows["moe_gate"].by_kernel == [{"slot": 0, "name": "gate_k", "count": 1, "gpu_ms": pytest.approx(0.002)}]
    assert rows["moe_layer"].as_json()["by_kernel"] == moe
    labelled = sorted(db.assign_ops(ranges[:2], kernels[:3]), key=lambda k: k.launch)
    replay = [db.Kernel(k.name, 100 * (i + 1)) for i, k in enumerate(labelled)] * 2
    got, why = db.label_by_position(labelled, replay, steps=2)
    assert why == "" and [(k.op, k.slot) for k in got] == [("moe_gate", 0), ("moe_layer", 0), ("moe_layer", 1)] * 2
    pt = db.BenchPoint(batch=1, context=512, step_ms=0.03, p10_ms=0.03, p90_ms=0.03, q1_ms=0.03, q3_ms=0.03,
                       tokens_per_s=1.0, roofline_ms=0.01, bytes=1.0,
                       attribution=[r.as_json() for r in db.attribute(ranges, kernels, steps=2)])
    from rich.console import Console
    console = Console(width=160, record=True)
    console.print(db.kernel_table(pt))
    text = console.export_text()
    assert "gate_k" in text and text.count("gemm") == 2


def test_graph_replay_kernels_take_their_op_from_the_eager_sequence():
    eager = [db.Kernel("a", 5, 1, "rms_norm"), db.Kernel("b", 5, 2, "fp8_linear"), db.Kernel("a", 5, 3, "rms_norm")]
    replay = [db.Kernel(n, d) for n, d in (("a", 1000), ("b", 3000), ("a", 2000)) * 2]
    got, why = db.label_by_position(eager, replay, steps=2)
    assert why == "" and [k.op for k in got] == ["rms_norm", "fp8_linear", "rms_norm"] * 2
    rows = {r.op: r for r in db.attribute([], got, steps=2)}
    assert rows["rms_norm"].gpu_ms == pytest.approx(0.003) and rows["fp8_linear"].gpu_ms == pytest.approx(0.003)
    assert db.label_by_position(eager, replay[:5], steps=2)[1]                 # count differs
    swapped = [db.Kernel("b" if k.name == "a" else "a", k.dur) for k in replay]
    got, why = db.label_by_position(eager, swapped, steps=2)
    assert got == [] and "differ" in why and "other kernels" in why
    # the graph runs a kernel the eager step did not (seen with NCCL at world 1): the reason names both sides
    other = [db.Kernel("c" if i == 1 else k.name, k.dur) for i, k in enumerate(replay)]
    got, why = db.label_by_position(eager, other, steps=2)
    assert got == [] and why.endswith("replay only [c x1], eager only [b x1]"), why
    # a device-to-device copy runs as the driver's copy kernel when replayed (H200, NCCL at world 1: NCCL's
    # all-reduce copies were 'Memcpy DtoD (Device -> Device)' eagerly, 'memcpy32_post' in the graph)
    eager = [db.Kernel("a", 5, 1, "rms_norm"), db.Kernel("Memcpy DtoD (Device -> Device)", 5, 2, "all_reduce"),
             db.Kernel("b", 5, 3, "shared")]
    replay = [db.Kernel(n, d) for n, d in (("a", 1), ("memcpy32_post", 2), ("b", 3)) * 2]
    got, why = db.label_by_position(eager, replay, steps=2)
    assert why == "" and [(k.name, k.op) for k in got] == [("a", "rms_norm"), ("memcpy32_post", "all_reduce"),
                                                            ("b", "shared")] * 2
    swapped = [replay[0], replay[2], replay[1]] + replay[3:]          # the copy started after its neighbour
    got, why = db.label_by_position(eager, swapped, steps=2)
    assert why == "" and [k.op for k in got[:3]] == ["rms_norm", "shared", "all_reduce"]
    assert db.work_name("memcpy32_post") == db.work_name("Memcpy DtoD (Device -> Device)") != db.work_name("b")
    # a kernel of another stream (a collective) started before its neighbour: labelled by occurrence of its name
    eager = [db.Kernel("a", 5, 1, "rms_norm"), db.Kernel("nccl", 5, 2, "all_reduce"), db.Kernel("b", 5, 3, "shared"),
             db.Kernel("a", 5, 4, "lm_head")]
    replay = [db.Kernel(n, d) for n, d in (("a", 1), ("b", 2), ("nccl", 3), ("a", 4), ("a", 1), ("nccl", 3),
                                            ("b", 2), ("a", 4))]
    got, why = db.label_by_position(eager, replay, steps=2)
    assert why == "" and [(k.name, k.op) for k in got] == [
        ("a", "rms_norm"), ("b", "shared"), ("nccl", "all_reduce"), ("a", "lm_head"),
        ("a", "rms_norm"), ("nccl", "all_reduce"), ("b", "shared"), ("a", "lm_head")]


def test_call_bytes_counts_what_is_read_sparsely():
    kv = torch.zeros(4, 1000, 512, dtype=torch.bfloat16)            # a big cache: only attended rows count
    q = torch.zeros(2, 8, 512, dtype=torch.bfloat16)
    lengths = torch.tensor([10, 30])
    kw = dict(q=q, kv=kv, seq_ids=torch.tensor([0, 1]), indices=torch.zeros(2, 64, dtype=torch.int32), lengths=lengths)
    out = torch.zeros(2, 8, 512, dtype=torch.bfloat16)
    got = db.call_bytes("sparse_attention", kw, out)
    dense = sum(db._nbytes(v) for k, v in kw.items() if k != "kv") + db._nbytes(out)
    assert got == pytest.approx(dense + 40 * 512 * 2)
    w = torch.zeros(8, 64, 32, dtype=torch.uint8)                     # 8 local experts, 2 touched
    kw = dict(x=torch.zeros(2, 64), w1=w, w2=w, w3=w, indices=torch.tensor([[1, 3], [3, 1]]), expert_offset=0)
    y = torch.zeros(2, 64)
    assert db.call_bytes("moe_experts", kw, y) == pytest.approx(
        db._nbytes(kw["x"]) + db._nbytes(kw["indices"]) + db._nbytes(y) + 3 * w.numel() * 2 / 8)
    # the gate inside (moe_routed / moe_layer): the experts the gate routes to, here by a hash table to 3 and 9
    kw = dict(x=torch.zeros(2, 64, dtype=torch.bfloat16), weight=torch.zeros(16, 64, dtype=torch.bfloat16),
              bias=None, tid2eid=torch.tensor([[3, 9], [9, 3]], dtype=torch.int32), token_ids=torch.tensor([0, 1]),
              topk=2, route_scale=1.0, w1=w, w2=w, w3=w, expert_offset=2)      # local experts 2..9
    sparse = ("w1", "w2", "w3", "tid2eid", "weight")
    dense = sum(db._nbytes(v) for k, v in kw.items() if k not in sparse) + db._nbytes(y)
    gate_rows = 2 * 64 * 2                # hash routing: the two routed experts' gate rows, not all 16
    assert db.call_bytes("moe_routed", kw, y) == pytest.approx(dense + 3 * w.numel() * 2 / 8 + 2 * 2 * 4 + gate_rows)
    assert db.call_bytes("moe_gate", {k: kw[k] for k in ("x", "weight", "bias", "tid2eid", "token_ids", "topk",
                                                        "route_scale")}, (y, y)) == pytest.approx(
        db._nbytes(kw["x"]) + db._nbytes(kw["token_ids"]) + 2 * db._nbytes(y) + 2 * 2 * 4 + gate_rows)
    # score routing reads every gate row; all-equal scores go to experts 0 and 1 (ties to the lower index): none local
    kw.update(tid2eid=None, bias=torch.zeros(16))
    assert db.call_bytes("moe_routed", kw, y) == pytest.approx(dense + 16 * 4 + 16 * 64 * 2)


# ---- the command -------------------------------------------------------------------------------
@pytest.mark.parametrize("args,why", [(["--context", "-1"], ">= 1"), (["--steps", "0"], "--steps"),
                                      (["--layers", "swa,mla"], "--layers"), (["--use", "nosuch=x"], "--use"),
                                      (["--use", "rms_norm"], "OP=IMPL"), (["--impl", "nosuch"], "--impl"),
                                      (["--contexts", "1:0"], "--context"), (["--module", "/nonexistent.py"], "exist")])
def test_decode_bench_refuses_bad_options_in_one_line(args, why, tmp_path):
    r = CliRunner().invoke(main, ["decode-bench", "--no-store", *args])
    assert r.exit_code == 2, r.output
    assert why in r.output and "Traceback" not in r.output
    assert len([ln for ln in r.output.splitlines() if ln.startswith("Error")]) == 1


@pytest.mark.parametrize("env,why", [({"KERNELBENCH_TUNED": "/nonexistent/tuned.json"}, "no such file"),
                                     ({"KERNELBENCH_PIN_CONFIG": "rms_norm={BLOCK_M:1}"}, "is not JSON")])
def test_decode_bench_refuses_bad_tuning_settings_before_any_work(env, why, monkeypatch):
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    r = CliRunner().invoke(main, ["decode-bench", "--no-store", "--impl", "triton"])
    assert r.exit_code == 2, r.output
    assert why in r.output and "Traceback" not in r.output
    assert len([ln for ln in r.output.splitlines() if ln.startswith("Error")]) == 1


@pytest.mark.parametrize("env,why", [({"KERNELBENCH_STREAM_PRIORITY": "main,bogus"}, "unknown stream kind"),
                                     ({"KERNELBENCH_KV_LANE": "yes"}, "KERNELBENCH_KV_LANE='yes'"),
                                     ({"KERNELBENCH_KV_LANE_FORK": "late"}, "KERNELBENCH_KV_LANE_FORK='late'"),
                                     ({"KERNELBENCH_SHARED_SPLIT": "2"}, "KERNELBENCH_SHARED_SPLIT='2'"),
                                     ({"KERNELBENCH_PDL": "on"}, "KERNELBENCH_PDL must be one of"),
                                     ({"KERNELBENCH_FP8_PROMOTE": "16"}, "KERNELBENCH_FP8_PROMOTE must be one of"),
                                     ({"KERNELBENCH_INSPECT_WORKERS": "0"},
                                      "KERNELBENCH_INSPECT_WORKERS must be a positive integer")])
def test_decode_bench_refuses_bad_scheduling_switches_before_any_work(env, why, monkeypatch):
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    r = CliRunner().invoke(main, ["decode-bench", "--no-store"])
    assert r.exit_code == 2, r.output
    assert why in r.output and "Traceback" not in r.output
    assert len([ln for ln in r.output.splitlines() if ln.startswith("Error")]) == 1


def test_decode_bench_cpu_profile_json_and_store(tmp_path):
    out = tmp_path / "d.json"
    url = f"sqlite:///{tmp_path / 'kb.sqlite'}"
    r = CliRunner().invoke(main, ["decode-bench", "--layers", "swa", "--batches", "1,3", "--steps", "2", "--warmup",
                                  "0", "--context", "8:20", "--contexts", "4,12", "--kernels", "--json", str(out),
                                  "--db", url])
    assert r.exit_code == 0, r.output
    res = json.loads(out.read_text())
    assert [p["batch"] for p in res["points"]] == [1, 3] and [p["batch"] for p in res["context_points"]] == [1, 1]
    assert [p["context"] for p in res["context_points"]] == [4, 12]
    assert res["layers"] == 1 and res["capacity"] >= 20 + 2 + 8
    for p in res["points"]:
        ops = [a["op"] for a in p["attribution"]]
        assert len(ops) == len(set(ops)) and {"sparse_attention_wo_a", "moe_layer", "lm_head"} <= set(ops)
        assert all(set(a) == {"op", "calls", "gpu_ms", "bytes", "kernels", "by_kernel"} for a in p["attribution"])
        moe = next(a for a in p["attribution"] if a["op"] == "moe_layer")
        assert moe["by_kernel"] and sum(k["gpu_ms"] for k in moe["by_kernel"]) == pytest.approx(moe["gpu_ms"])
        assert p["attribution_source"] == "host time" and p["kernels_per_step"] > 0
        assert p["bytes"] > 0
    assert not math.isnan(res["per_request_ms"]) and "fit: step =" in r.output and "time per op" in r.output
    assert r.output.count("kernels per op at C=") == 2            # --kernels (implies --profile): every C
    assert r.output.count("the rest of the step") == 4             # issue 17's measure at every attributed point
    from kernelbench.db.store import Store
    from kernelbench.harness.roofline import latest_bench
    rows = latest_bench(Store(url), ops=[db.DECODE_OP])
    assert len(rows) == 4 and {r["params"]["C"] for r in rows} == {1, 3}
    assert all(r["extra"]["tokens_per_s"] > 0 for r in rows)
    assert res["fp8_promote"] == 32 and all(r["extra"]["fp8_promote"] == 32 for r in rows)  # the numerics it ran


def test_decode_bench_records_the_fp8_promotion_it_ran(tmp_path, monkeypatch):
    # a run under KERNELBENCH_FP8_PROMOTE says so in its header and its JSON (the default's records carry 32, above)
    monkeypatch.setenv("KERNELBENCH_FP8_PROMOTE", "64")
    out = tmp_path / "d.json"
    r = CliRunner().invoke(main, ["decode-bench", "--layers", "swa", "--batches", "1", "--steps", "1", "--warmup", "0",
                                  "--context", "8", "--json", str(out), "--no-store"])
    assert r.exit_code == 0, r.output
    assert json.loads(out.read_text())["fp8_promote"] == 64 and "fp8 dots promoted every 64 products" in r.output
    monkeypatch.setenv("KERNELBENCH_FP8_PROMOTE", "0")           # Triton's own accumulation: no such words
    r = CliRunner().invoke(main, ["decode-bench", "--layers", "swa", "--batches", "1", "--steps", "1", "--warmup", "0",
                                  "--context", "8", "--json", str(out), "--no-store"])
    assert r.exit_code == 0 and json.loads(out.read_text())["fp8_promote"] == 0 and "promoted" not in r.output


def test_profile_runs_after_every_point_is_timed(tmp_path, monkeypatch):
    """--profile attributes each point in a second pass, after all timing: a torch.profiler run can slow the
    graph replays timed after it in the same process (docs/perf/README.md), so no point may be timed after one."""
    log = []
    real_time, real_profile = db._time_steps, db.profile_step

    def time_steps(run, advance, steps, dev):
        log.append("time")
        return real_time(run, advance, steps, dev)

    def profile_step(model, eager, replay, reset, dev, step_ms, op_bytes, steps=3):
        log.append(("profile", step_ms))
        return real_profile(model, eager, replay, reset, dev, step_ms, op_bytes, steps)

    monkeypatch.setattr(db, "_time_steps", time_steps)
    monkeypatch.setattr(db, "profile_step", profile_step)
    out = tmp_path / "d.json"
    r = CliRunner().invoke(main, ["decode-bench", "--layers", "swa", "--batches", "1,3", "--steps", "2", "--warmup",
                                  "0", "--context", "8:20", "--contexts", "12", "--profile", "--json", str(out),
                                  "--no-store"])
    assert r.exit_code == 0, r.output
    assert log[:3] == ["time"] * 3 and [e[0] for e in log[3:]] == ["profile"] * 3, log
    res = json.loads(out.read_text())
    points = res["points"] + res["context_points"]
    assert [e[1] for e in log[3:]] == [p["step_ms"] for p in points]     # each profile scaled to its own point
    assert all(p["attribution"] and p["kernels_per_step"] > 0 for p in points)


def test_decode_bench_use_swaps_one_op_for_a_users_module(tmp_path):
    from kernelbench import registry
    marker = tmp_path / "calls.txt"
    mod = tmp_path / "my_norm.py"
    mod.write_text(f'''
from kernelbench.registry import get_impl, register_impl

@register_impl("rms_norm", "wholemodel_test_norm")
def my_rms_norm(**kw):
    with open({str(marker)!r}, "a") as f:
        f.write("x")
    return get_impl("rms_norm", "reference").fn(**kw)
''')
    out = tmp_path / "d.json"
    try:
        r = CliRunner().invoke(main, ["decode-bench", "--no-store", "--layers", "swa", "--batches", "1", "--steps", "1",
                                      "--warmup", "0", "--context", "8", "--module", str(mod),
                                      "--use", "rms_norm=wholemodel_test_norm", "--json", str(out)])
        assert r.exit_code == 0, r.output
        res = json.loads(out.read_text())
        assert res["overrides"] == {"rms_norm": "wholemodel_test_norm"} and res["impl"] == "reference"
        # the first attn norm and the head's final norm (q_norm runs inside attention_front), in the byte-counting
        # step and the timed step
        assert len(marker.read_text()) >= 2 * 2
    finally:
        registry.unregister_impl("rms_norm", "wholemodel_test_norm")


def test_scaling_module_errors_are_one_line():
    r = CliRunner().invoke(main, ["scaling", "--module", "/nonexistent/mine.py"])
    assert r.exit_code == 2 and "--module" in r.output and "Traceback" not in r.output, r.output


class _Ev:
    """A stand-in for a Kineto event (the methods decode_bench reads)."""

    def __init__(self, name, dev, start, dur, corr, linked=0, annotation=False, kind="kernel"):
        self._v = (name, dev, start, dur, corr, linked, annotation, kind)

    def name(self): return self._v[0]                      # noqa: E704
    def device_type(self): return self._v[1]               # noqa: E704
    def start_ns(self): return self._v[2]                  # noqa: E704
    def end_ns(self): return self._v[2] + self._v[3]       # noqa: E704
    def duration_ns(self): return self._v[3]               # noqa: E704
    def correlation_id(self): return self._v[4]            # noqa: E704
    def linked_correlation_id(self): return self._v[5]     # noqa: E704
    def is_user_annotation(self): return self._v[6]        # noqa: E704
    def activity_type(self): return self._v[7]             # noqa: E704
    def device_resource_id(self): return 7 if self._v[1] != torch.autograd.DeviceType.CPU else 0   # noqa: E704


def test_kineto_records_link_kernels_to_their_launch_and_skip_device_annotations():
    from types import SimpleNamespace

    from torch.autograd import DeviceType
    CPU, GPU = DeviceType.CPU, DeviceType.CUDA
    evs = [_Ev("rms_norm", CPU, 100, 50, 1, annotation=True, kind="user_annotation"),
           _Ev("cuLaunchKernel", CPU, 110, 5, 501, linked=1, kind="cuda_driver"),
           _Ev("fp8_linear", CPU, 200, 80, 2, annotation=True, kind="user_annotation"),
           _Ev("aten::mm", CPU, 210, 30, 3, kind="cpu_op"),
           _Ev("cudaLaunchKernel", CPU, 215, 5, 502, linked=3, kind="cuda_runtime"),
           _Ev("cudaLaunchKernel", CPU, 400, 5, 503, kind="cuda_runtime"),         # outside any range
           _Ev("norm_k", GPU, 1000, 7000, 501, linked=1),
           _Ev("gemm_k", GPU, 9000, 20000, 502, linked=3),
           _Ev("add_k", GPU, 30000, 1000, 503),
           _Ev("fp8_linear", GPU, 8900, 20200, 2, annotation=True, kind="gpu_user_annotation"),
           _Ev("Memset (Device)", GPU, 29500, 300, 504, kind="gpu_memset")]
    prof = SimpleNamespace(profiler=SimpleNamespace(kineto_results=SimpleNamespace(events=lambda: evs)))
    ranges, kernels = db._records(prof, {"rms_norm", "fp8_linear"})
    assert [r.op for r in ranges] == ["rms_norm", "fp8_linear"]
    assert [k.name for k in kernels] == ["norm_k", "gemm_k", "add_k", "Memset (Device)"]   # no annotation copy
    assert {k.stream for k in kernels} == {7}                                    # the device resource (stream)
    rows = {r.op: r for r in db.attribute(ranges, kernels, 1)}
    assert rows["rms_norm"].gpu_ms == pytest.approx(0.007) and rows["fp8_linear"].gpu_ms == pytest.approx(0.020)
    assert rows[db.OUTSIDE].gpu_ms == pytest.approx(0.0013)
    order = db._device_kernels_in_order(prof)
    assert [k.name for k in order] == ["norm_k", "gemm_k", "Memset (Device)", "add_k"]


def test_embedding_bytes_are_the_rows_read():
    w = torch.zeros(1000, 64, dtype=torch.bfloat16)
    ids = torch.tensor([1, 2, 3])
    out = torch.zeros(3, 64, dtype=torch.bfloat16)
    assert db.call_bytes("embedding", dict(ids=ids, weight=w, vocab_start=0), out) == 24 + 2 * 3 * 64 * 2


def _gpu_short_step(tmp_path, batches: str, *extra: str) -> dict:
    """decode-bench of the short Flash set on the GPU under a CUDA graph (10 timed steps) -> its JSON; the graph must
    have been captured."""
    out = tmp_path / "d.json"
    r = CliRunner().invoke(main, ["decode-bench", "--device", "cuda", "--impl", "triton", "--graph", "on", "--layers",
                                  "short", "--batches", batches, "--steps", "10", "--no-store", "--json", str(out),
                                  *extra])
    assert r.exit_code == 0, r.output
    res = json.loads(out.read_text())
    assert res["graph"] and not res["graph_error"]
    return res


@pytest.mark.gpu
def test_gpu_graph_attribution_adds_up_to_the_step(tmp_path):
    """On a GPU: the short Flash set under a CUDA graph (the side stream on); the op rows come from the replayed
    kernels, less the time kernels ran side by side never exceed the step, and with the idle row they make it."""
    res = _gpu_short_step(tmp_path, "1,16", "--profile")
    for p in res["points"]:
        assert p["attribution_source"] == "graph replay kernels", p["attribution_note"]
        busy = db.op_rows_busy(p["attribution"])           # op rows less what ran beside other kernels
        idle = sum(a["gpu_ms"] for a in p["attribution"] if a["op"] == db.IDLE)
        assert 0 < busy <= 1.05 * p["step_ms"] and busy + idle == pytest.approx(max(p["step_ms"], busy))
        assert p["kernels_per_layer"] > 0 and p["roofline_ms"] > 0
        assert (db.PDL_NOTE in p["attribution_note"]) == pdl_on(torch.device("cuda"), p["batch"])   # C = 1: PDL
        early = db.moe_starts_early(p["configs"], torch.device("cuda"))   # C = 16: moe_routed's UP_EARLY default
        assert (db.EARLY_NOTE in p["attribution_note"]) == (early and not pdl_on(torch.device("cuda"), p["batch"]))
        assert early == (p["batch"] >= 16 and torch.cuda.get_device_capability()[0] >= 9)
        lanes = p["lanes"]                                  # the side stream ran: the lanes split the kernels' time
        # main and the decoder's side lane however many streams the replayed graph's branches ran on (one GPU: no
        # NCCL), + from SHARED_SIDE_MIN_T tokens the MoE op's own side stream (its rank's slice of the shared expert:
        # kernels/common.py Beside; H200, session 16 call 4: 3 streams at C = 16), + up to the KV lane's token limit
        # the attention layers' compressor on a lane of its own (kernelbench/decoder/lanes.py, the default since
        # session 18: the short set has csa / hca layers)
        streams = 2 + (p["batch"] >= SHARED_SIDE_MIN_T) + (p["batch"] <= kv_lane_from_env())
        assert lanes["streams"] == streams and 0 < lanes["side_ms"] < lanes["main_ms"] <= p["step_ms"], lanes
        assert 0 <= lanes["side_alone_ms"] <= lanes["side_ms"], lanes
        by_op = lanes["side_alone_by_op_ms"]               # per op: the side ops' kernels, never the main lane's
        assert all(ms > 0 for ms in by_op.values()) and list(by_op.values()) == sorted(by_op.values(), reverse=True)
        assert (sum(by_op.values()) > 0) == (lanes["side_alone_ms"] > 0)
        assert sum(by_op.values()) >= lanes["side_alone_ms"] - 1e-9, lanes


@pytest.mark.skipif(os.environ.get("TRITON_INTERPRET") != "1", reason="runs fp8_linear's kernel: TRITON_INTERPRET=1")
def test_decode_bench_reports_where_each_kernel_config_came_from(tmp_path, monkeypatch):
    """Every lookup of the step is in the JSON and the store (tuned at its key, borrowed or the default) and the
    ones not tuned at their key are printed: on the CPU nothing is tuned until a file says so for 'cpu'."""
    monkeypatch.setenv("KERNELBENCH_QUIET_TUNING", "1")
    args = ["decode-bench", "--layers", "swa", "--batches", "1,2", "--steps", "1", "--warmup", "0", "--context", "8",
            "--impl", "reference", "--use", "fp8_linear=triton"]
    out = tmp_path / "d.json"
    r = CliRunner().invoke(main, args + ["--no-store", "--json", str(out)])
    assert r.exit_code == 0, r.output
    looked = [p["configs"] for p in json.loads(out.read_text())["points"]]
    assert all(c and {x["op"] for x in c} == {"fp8_linear"} and {x["source"] for x in c} == {"default"} for c in looked)
    assert "C=1: 1 kernel configs looked up: 1 default" in r.output and "M=2 N=256 K=256" in r.output
    first = looked[0][0]
    tuned = tmp_path / "tuned.json"
    second = looked[1][0]                  # M = 2: a tile (BM 16); M = 1 ran the GEMV, which no tile may replace
    wider = {**second["key"], "N": 2 * second["key"]["N"]}     # borrowed at M = 2 (never across M: the batch)
    assert json.loads(out.read_text())["unused_entries"] == []     # the packaged table has no 'cpu' entries
    unused = {**second["key"], "M": 64}                 # never borrowed at M = 1 or 2 (the batch field)
    tuned.write_text(json.dumps({"version": 1, "entries": [
        {"device": "cpu", "op": "fp8_linear", "key": first["key"], "config": first["config"], "us": 9.0},
        {"device": "cpu", "op": "fp8_linear", "key": wider, "config": second["config"], "us": 11.0},
        {"device": "cpu", "op": "fp8_linear", "key": unused, "config": second["config"], "us": 12.0},
        {"device": "NVIDIA H200", "op": "fp8_linear", "key": unused, "config": second["config"], "us": 5.0}]}))
    monkeypatch.setenv("KERNELBENCH_TUNED", str(tuned))
    url = f"sqlite:///{tmp_path / 'kb.sqlite'}"
    r = CliRunner().invoke(main, args + ["--json", str(out), "--db", url])
    assert r.exit_code == 0, r.output
    assert json.loads(out.read_text())["unused_entries"] == [
        {"op": "fp8_linear", "key": unused, "config": second["config"]}]      # this device's only, not the H200's
    assert "1 of the 3 tuned entries for this device answered no lookup of this run" in r.output
    at1, at2 = (p["configs"] for p in json.loads(out.read_text())["points"])
    assert [(c["source"], c["tuned_us"]) for c in at1] == [("exact", 9.0)]
    assert [(c["source"], c["tuned_key"], c["key"]["M"]) for c in at2] == [("nearest", wider, 2)]
    from kernelbench.db.store import Store
    from kernelbench.harness.roofline import latest_bench
    rows = latest_bench(Store(url), ops=[db.DECODE_OP])
    assert sorted(c["source"] for row in rows for c in row["extra"]["configs"]) == ["exact", "nearest"]


@pytest.mark.skipif(os.environ.get("TRITON_INTERPRET") != "1", reason="runs fp8_linear's kernel: TRITON_INTERPRET=1")
def test_ablate_tuned_reruns_the_step_with_each_tuned_ops_entries_removed(tmp_path, monkeypatch):
    """--ablate-tuned: a step whose fp8_linear ran a tuned config is timed in pairs against the step with fp8_linear's
    entries removed (its lookups then resolve to the default); the tuned file in use is restored afterwards; a step
    with nothing tuned says so."""
    from kernelbench import tuned_configs
    monkeypatch.setenv("KERNELBENCH_QUIET_TUNING", "1")
    key = {"M": 1, "N": 256, "K": 256}
    from kernelbench.kernels import linear as KL
    tuned = tmp_path / "tuned.json"
    tuned.write_text(json.dumps({"version": 1, "entries": [
        {"device": "cpu", "op": "fp8_linear", "key": key, "config": KL.fp8_default(key), "us": 9.0},
        {"device": "cpu", "op": "rms_norm", "key": {"M": 1}, "config": {"num_warps": 4}, "us": 1.0}]}))
    monkeypatch.setenv("KERNELBENCH_TUNED", str(tuned))
    args = ["decode-bench", "--no-store", "--layers", "swa", "--batches", "1", "--steps", "1", "--warmup", "0",
            "--context", "8", "--impl", "reference", "--use", "fp8_linear=triton", "--ablate-tuned"]
    out = tmp_path / "d.json"
    r = CliRunner().invoke(main, args + ["--json", str(out)])
    assert r.exit_code == 0, r.output
    pt, = json.loads(out.read_text())["points"]
    assert [c["source"] for c in pt["configs"]] == ["exact"]
    row, = pt["ablation"]
    assert (row["op"], row["entries_removed"], row["sources"]) == ("fp8_linear", 1, {"default": 1})
    assert (row["method"], row["pairs"]) == ("eager", 1) and row["verdict"].startswith("too few pairs")
    assert row["step_ms"] > 0 and row["tuned_ms"] > 0 and row["delta_ci_ms"] is None
    assert row["delta_ms"] == pytest.approx(row["step_ms"] - row["tuned_ms"])
    assert row["paired_delta_ms"] == pytest.approx(row["delta_ms"])          # one pair: the same difference
    assert "the step without each op's tuned entries" in r.output and "paired and interleaved" in r.output
    control = pt["control"]                          # the A/A control, timed first (one pair: no interval)
    assert control["control"] and control["pairs"] == 1 and control["verdict"].startswith("A/A: too few pairs")
    assert row["raw_verdict"] == row["verdict"] and "C=1: A/A control (the step captured again" in r.output
    assert os.environ["KERNELBENCH_TUNED"] == str(tuned) and len(tuned_configs.entries()) == 2
    monkeypatch.setenv("KERNELBENCH_TUNED", str(tmp_path / "none.json"))
    (tmp_path / "none.json").write_text(json.dumps({"version": 1, "entries": []}))
    r = CliRunner().invoke(main, args + ["--json", str(out)])
    assert r.exit_code == 0, r.output
    assert "no kernel of the step ran a tuned config" in r.output
    assert json.loads(out.read_text())["points"][0]["control"] == {}           # nothing to judge: no control


def test_median_interval_is_the_sign_tests():
    """The k-th smallest and largest of n values, k the largest rank with P(Binomial(n, 1/2) < k) <= 2.5%: at n = 20,
    P(X <= 5) = 21700 / 2^20 = 2.07% and P(X <= 6) = 5.77%, so the 6th and the 15th; below 6 values none exists."""
    values = [float(v) for v in range(20, 0, -1)]
    assert db.median_interval(values) == (6.0, 15.0)
    assert db.median_interval([3.0, 1.0, 2.0, 6.0, 5.0, 4.0]) == (1.0, 6.0)       # 6: min and max, 1/32 <= 5%
    assert db.median_interval([1.0] * 5) is None and db.ABLATION_MIN_PAIRS == 6


def test_paired_verdict_cancels_a_drift_both_settings_share():
    """Tuned and ablated steps that drift together by 0.3 ms over the rounds (clocks, heat) and differ only by
    symmetric jitter: "within noise", though the ablated step's quartiles and the tuned one's would not overlap had the
    two been timed one after the other. A gap each pair shows, beyond the jitter, gives helps / hurts."""
    drift = [10.0 + 0.3 * i / 19 for i in range(20)]
    jitter = [0.004 * (-1) ** i for i in range(20)]
    row = db.paired_comparison(drift, [d + j for d, j in zip(drift, jitter)])
    assert row["verdict"] == "within noise" and abs(row["paired_delta_ms"]) <= 0.004 and row["pairs"] == 20
    assert row["delta_q1_ms"] <= row["paired_delta_ms"] <= row["delta_q3_ms"]
    lo, hi = row["delta_ci_ms"]
    assert lo <= 0 <= hi
    later = [d + 0.3 for d in drift]            # the same ablated step timed after the tuned one, unpaired
    assert statistics.quantiles(later, n=4)[0] > statistics.quantiles(drift, n=4)[2]
    for gap, want in ((0.02, "helps"), (-0.02, "hurts"), (0.002, "within noise")):
        row = db.paired_comparison(drift, [d + gap + j for d, j in zip(drift, jitter)])
        assert row["verdict"] == want, (gap, row)
        assert row["paired_delta_ms"] == pytest.approx(gap, abs=0.0041)
        assert row["step_ms"] - row["tuned_ms"] == pytest.approx(row["delta_ms"])
    assert db.paired_comparison(drift[:5], [d + 1 for d in drift[:5]])["verdict"].startswith("too few pairs")
    assert db.paired_comparison(drift[:6], [d + 1 for d in drift[:6]])["verdict"] == "helps"
    with pytest.raises(ValueError, match="as many"):
        db.paired_comparison(drift, drift[:3])


class _RecordingStep:
    """A stand-in for a point's step: each run looks up a config for `op` (as a kernel launch does) and logs the
    source the lookup resolved to; advance and reset are logged too."""

    def __init__(self, op: str, key: dict):
        self.op, self.key, self.log = op, key, []

    def eager(self):
        from kernelbench import tuned_configs
        tuned_configs.lookup(self.op, self.key, {"BLOCK": 4})
        self.log.append(tuned_configs.resolve(self.op, self.key, {"BLOCK": 4}).source)

    def advance(self):
        self.log.append("advance")

    def reset(self):
        self.log.append("reset")


def test_ablation_alternates_the_settings_and_hides_the_entries_in_the_ablated_runs(tmp_path, monkeypatch):
    """Eagerly (the CPU path): one untimed run without the op's entries (compiles the defaults), then per pair the
    tuned step (A) and the ablated step (B) at the same positions, in the order A B, B A, A B, ...; in B's runs the
    op's lookups resolve to the default, in A's to the tuned entry; the entries are back afterwards."""
    from kernelbench import tuned_configs
    monkeypatch.setenv("KERNELBENCH_QUIET_TUNING", "1")
    tuned = tmp_path / "tuned.json"
    key = {"M": 1}
    tuned.write_text(json.dumps({"version": 1, "entries": [
        {"device": "cpu", "op": "opx", "key": key, "config": {"BLOCK": 8}, "us": 1.0},
        {"device": "cpu", "op": "opx", "key": {"M": 64}, "config": {"BLOCK": 16}, "us": 2.0}]}))
    monkeypatch.setenv("KERNELBENCH_TUNED", str(tuned))
    step = _RecordingStep("opx", key)
    pt = db.BenchPoint(1, 8.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0,
                       configs=[{"op": "opx", "source": "exact"}, {"op": "opy", "source": "default"}])
    row, = db.ablate_tuned(pt, step, step.eager, None, 6, torch.device("cpu"))
    A, B = "exact", "default"
    assert step.log == [B, "reset"] + [A, B, "advance", B, A, "advance"] * 3
    assert (row["op"], row["entries_removed"], row["sources"], row["method"], row["pairs"]) == (
        "opx", 2, {"default": 1}, "eager", 6)
    assert row["verdict"] in ("helps", "hurts", "within noise")
    assert tuned_configs.resolve("opx", key, {}).source == "exact"


def test_ablation_captures_the_ablated_graph_with_the_entries_hidden(tmp_path, monkeypatch):
    """With a graph (`capture`): the ablated step is captured inside entries_without(op) (its lookups at capture are
    the defaults: `sources`), its replays are timed alternately with the tuned replays and need no hiding; a capture
    that fails leaves both settings eager, said in `method`."""
    monkeypatch.setenv("KERNELBENCH_QUIET_TUNING", "1")
    tuned = tmp_path / "tuned.json"
    tuned.write_text(json.dumps({"version": 1, "entries": [
        {"device": "cpu", "op": "opx", "key": {"M": 1}, "config": {"BLOCK": 8}, "us": 1.0}]}))
    monkeypatch.setenv("KERNELBENCH_TUNED", str(tuned))
    step = _RecordingStep("opx", {"M": 1})
    pt = db.BenchPoint(1, 8.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, configs=[{"op": "opx", "source": "exact"}])

    def capture(eager):
        eager()                                            # what the capture launched, looked up now
        return lambda: step.log.append("replay B")
    row, = db.ablate_tuned(pt, step, lambda: step.log.append("replay A"), capture, 4, torch.device("cpu"))
    assert step.log == ["default", "reset"] + ["replay A", "replay B", "advance", "replay B", "replay A", "advance"] * 2
    assert (row["sources"], row["method"], row["pairs"]) == ({"default": 1}, "graph replay", 4)

    def failing(eager):
        raise RuntimeError("operation not permitted when stream is capturing\nmore")
    step.log.clear()
    row, = db.ablate_tuned(pt, step, lambda: step.log.append("replay A"), failing, 2, torch.device("cpu"))
    assert row["method"].startswith("eager (the graph without its entries failed to capture: RuntimeError")
    assert step.log == ["default", "reset", "exact", "default", "advance", "default", "exact", "advance"]


@pytest.mark.gpu
def test_gpu_ablate_tuned_recaptures_the_graph_per_op(tmp_path):
    """On a GPU with the packaged (H200-tuned) file: every op that ran a tuned config at C gets a row: its own CUDA
    graph, captured with that op's lookups back on the defaults (none of them tuned any more), replayed alternately
    with the tuned graph in --steps pairs."""
    res = _gpu_short_step(tmp_path, "1", "--ablate-tuned")
    pt, = res["points"]
    tuned_ops = {c["op"] for c in pt["configs"] if c["source"] in ("exact", "nearest", "other device")}
    assert [a["op"] for a in pt["ablation"]] == sorted(tuned_ops)
    for a in pt["ablation"]:
        assert a["entries_removed"] > 0 and set(a["sources"]) <= {"default", "pinned"} and a["step_ms"] > 0
        assert a["method"] == "graph replay" and a["pairs"] == 10 and a["tuned_ms"] > 0
        assert a["delta_q1_ms"] <= a["paired_delta_ms"] <= a["delta_q3_ms"]
        lo, hi = a["delta_ci_ms"]
        assert lo <= a["paired_delta_ms"] <= hi
        assert a["verdict"] in ("helps", "hurts", "within noise", db.CONTROL_OVERLAP)
        assert a["raw_verdict"] in ("helps", "hurts", "within noise")
    assert pt["control"]["control"] and pt["control"]["method"] == "graph replay" and pt["control"]["pairs"] == 10


def test_lane_times_find_the_side_work_the_main_lane_did_not_hide():
    # two steps; main stream 7: [0, 10) and [14, 20); side stream 9: [2, 8) beside it and [9, 16) partly alone
    main = [db.Kernel("m1", 10, start=1000, stream=7), db.Kernel("m2", 6, start=1014, stream=7)]
    side = [db.Kernel("s1", 6, start=1002, stream=9), db.Kernel("s2", 7, start=1009, stream=9)]
    shift = [db.Kernel(k.name, k.dur, start=k.start + 100, stream=k.stream) for k in main + side]
    got = db.lane_times(main + side + shift, steps=2)
    assert got["streams"] == 2
    assert got["main_ms"] == pytest.approx(16 / 1e6) and got["side_ms"] == pytest.approx(13 / 1e6)
    assert got["side_alone_ms"] == pytest.approx(4 / 1e6)        # [10, 14): only s2 ran
    assert got["side_alone_by_op_ms"] == {db.UNLABELLED: pytest.approx(4 / 1e6)}
    labelled = [db.Kernel(k.name, k.dur, op=k.name[:1] if k.stream == 7 else k.name, start=k.start, stream=k.stream)
                for k in main + side]
    labelled.append(db.Kernel("s3", 2, op="s1", start=1015, stream=9))      # [15, 17): beside m2, never alone
    labelled.append(db.Kernel("s4", 6, op="s1", start=1018, stream=11))     # [20, 24) alone on a third lane
    got = db.lane_times(labelled, steps=1)
    assert got["streams"] == 3
    assert got["side_alone_by_op_ms"] == {"s2": pytest.approx(4 / 1e6), "s1": pytest.approx(4 / 1e6)}
    assert list(got["side_alone_by_op_ms"]) == ["s1", "s2"]       # equal: by name
    assert got["side_alone_ms"] == pytest.approx(8 / 1e6)
    assert db.lane_times(main, steps=1) == {}                     # one stream: nothing to split
    assert db.lane_times([db.Kernel("x", 5, stream=1), db.Kernel("y", 5, stream=2)], steps=1) == {}   # no starts


def test_replayed_kernels_keep_the_lane_of_their_eager_kernel():
    """A replayed graph runs its branches on streams of the driver's choosing (42 at C = 1 on the H200): the lanes
    come from the eager step's streams, carried by position (and by name where the order differs)."""
    ranges = [db.Range("a", 0, 5), db.Range("b", 5, 10)]
    eager = db.assign_ops(ranges, [db.Kernel("m1", 10, 1, start=0, stream=7), db.Kernel("s1", 6, 6, start=2, stream=9),
                                   db.Kernel("m2", 6, 3, start=14, stream=7)])
    assert [(k.op, k.stream) for k in eager] == [("a", 7), ("b", 9), ("a", 7)]      # the op labels keep the streams
    replay = [db.Kernel("m1", 10, start=1000, stream=31), db.Kernel("s1", 6, start=1002, stream=44),
              db.Kernel("m2", 6, start=1014, stream=52)]
    got, why = db.label_by_position(eager, replay, steps=1)
    assert not why and [k.lane for k in got] == [7, 9, 7] and [k.stream for k in got] == [31, 44, 52]
    lanes = db.lane_times(got, steps=1)
    assert lanes["streams"] == 2 and lanes["main_ms"] == pytest.approx(16 / 1e6)
    assert lanes["side_alone_ms"] == pytest.approx(0.0)
    swapped, why = db.label_by_position(eager, [replay[1], replay[0], replay[2]], steps=1)
    assert not why and [(k.name, k.lane) for k in swapped] == [("s1", 9), ("m1", 7), ("m2", 7)]


def test_rest_per_layer_is_the_step_less_the_moe_kernels():
    """Issue 17's measure: (step - the MoE ops' GPU time) per layer, beside the MoE's own per layer."""
    pt = db.BenchPoint(1, 512.0, 4.3, 4.3, 4.3, 4.3, 4.3, 232.0, attribution=[
        {"op": "moe_routed", "gpu_ms": 1.0}, {"op": "shared_expert", "gpu_ms": 0.075}, {"op": "mhc_post_pre_norm",
         "gpu_ms": 0.7}, {"op": db.IDLE, "gpu_ms": 0.2}])
    moe, rest = db.rest_per_layer(pt, 43)
    assert moe == pytest.approx(1075 / 43) and rest == pytest.approx((4300 - 1075) / 43)
    assert db.rest_per_layer(db.BenchPoint(1, 512.0, 4.3, 4.3, 4.3, 4.3, 4.3, 232.0), 43) is None


def test_moe_early_start_is_named_in_the_attribution_note(monkeypatch):
    """A point whose MoE config starts the W1 / W3 launch early (kernels/moe.py UP_EARLY, compiled sm_90+) gets
    EARLY_NOTE (its span includes its wait); "off", other ops' configs and an uncompiled device do not."""
    from kernelbench.kernels import moe
    routed = {"op": "moe_routed", "key": {"T": 16}, "source": "default", "config": {"UP_EARLY": "spec"}}
    off = {**routed, "config": {"UP_EARLY": "off"}}
    other = {"op": "fp8_linear", "key": {"M": 16}, "source": "default", "config": {"UP_EARLY": "spec"}}
    monkeypatch.setattr(moe, "sm90_compiled", lambda device: True)
    assert db.moe_starts_early([other, routed], torch.device("cpu"))
    assert not db.moe_starts_early([other, off], torch.device("cpu"))
    assert not db.moe_starts_early([{**routed, "config": None}], torch.device("cpu"))
    monkeypatch.setattr(moe, "sm90_compiled", lambda device: False)
    assert not db.moe_starts_early([routed], torch.device("cpu"))
    assert "UP_EARLY" in db.EARLY_NOTE
