"""The in-kernel timeline (kernels/trace.py): off by default (the kernels compile as before), compiled-only, and on a
GPU every program of a traced MoE call leaves four ordered marks while the output stays bit for bit the same."""
import os
import subprocess
import sys
import textwrap

import pytest
import torch

from kernelbench import registry
from kernelbench.kernels import trace

SMALL = {"T": 2, "D": 256, "E": 16, "El": 4, "offset": 0, "F": 256, "K": 2, "V": 64, "hash": False, "rs": 1.5}


def test_trace_args_are_empty_outside_a_recording():
    assert trace.trace_args("moe W1/W3", 8, "cpu") == {}


@pytest.mark.skipif(not trace.INTERPRET, reason="the interpreter's refusal; compiled runs are the GPU test's")
def test_recording_refuses_the_interpreter():
    with pytest.raises(RuntimeError, match="TRITON_INTERPRET"):
        with trace.recording():
            pass


def test_a_recording_refuses_a_cpu_launch(monkeypatch):
    monkeypatch.setattr(trace, "INTERPRET", False)
    with trace.recording() as rec:
        with pytest.raises(RuntimeError, match="CUDA device"):
            trace.trace_args("moe W2", 4, "cpu")
    assert rec.launches == []


def test_the_arena_hands_out_disjoint_rows_and_refuses_past_its_end():
    # the rows are slices of one arena allocated once (never the caching allocator per launch: a first mark is
    # stored before the PDL wait, while the previous kernel may still use memory the allocator sees as free)
    rec = trace.Recording(capacity_rows=10)
    a = rec.rows_for("moe gate (one launch)", 4, "cpu")
    b = rec.rows_for("moe W1/W3", 6, "cpu")
    assert a.data_ptr() + 4 * trace.SLOTS * 8 == b.data_ptr() and a.untyped_storage().data_ptr() == \
        b.untyped_storage().data_ptr()
    assert (a == -1).all() and (b == -1).all()
    with pytest.raises(RuntimeError, match="arena .10 rows. is full at moe W2"):
        rec.rows_for("moe W2", 1, "cpu")
    b.fill_(5)
    rec.reset()
    assert (b == -1).all()
    assert rec.keep_last_calls(2, 1) == 1 and [t.label for t in rec.launches] == ["moe W1/W3"]
    with pytest.raises(ValueError, match="not 3 calls"):
        rec.keep_last_calls(3, 1)
    with pytest.raises(ValueError, match="capacity_rows"):
        trace.Recording(capacity_rows=0)


_COMPILE = textwrap.dedent("""
    import json, sys, torch, triton
    from kernelbench import registry
    from kernelbench.harness import inspector
    registry.load_builtin()
    case = json.loads(sys.argv[1])
    impl = registry.get_impl("moe_layer", "triton")
    launches = inspector.capture_impl(impl, registry.get_op("moe_layer"), case, None, sms=132)
    slots = {**impl.default_config(case), "ROUTE_SORT": "slots"}     # the gate tail's other form (trace_step_after)
    launches += [L for L in inspector.capture_impl(impl, registry.get_op("moe_layer"), case, slots, sms=132)
                 if "_gate_fused_kernel" in L.name]
    up = {**impl.default_config(case), "GATE": "fused", "GATE_TAIL": "up"}     # no gate tail; the W1/W3 top-k's step
    launches += [L for L in inspector.capture_impl(impl, registry.get_op("moe_layer"), case, up, sms=132)
                 if "_gate_fused_kernel" in L.name or L.kwargs.get("LOCAL")]
    two = {**impl.default_config(case), "GATE": "fused", "GATE_TOPK_ROWS": 2}     # the top-k on a padded two-row tile
    launches += [L for L in inspector.capture_impl(impl, registry.get_op("moe_layer"), case, two, sms=132)
                 if "_gate_fused_kernel" in L.name]
    out = []
    for L in launches:
        if not ("_gate_fused_kernel" in L.name or "_grouped_gemm_kernel" in L.name):
            continue
        L.kwargs.update(TRACE=True, trace_ptr=torch.empty((1, 16), dtype=torch.int64))
        for arch in (90, 120):
            r = inspector.compile_launch(L, arch)
            src, target, options, *_ = inspector._bind(L, arch)
            ptx = triton.compile(src, target=target, options=options.__dict__).asm["ptx"]   # the cached build's
            out.append({"kernel": L.name, "arch": arch, "error": r.error, "spill": r.spill_bytes,
                        "timer": "%globaltimer" in ptx and "%clock64" in ptx and "%smid" in ptx})
    print(json.dumps(out))
""")


def test_traced_moe_kernels_compile_for_sm90_and_sm120_without_spills():
    # offline (no GPU), in a process without the interpreter: the one-launch gate (both slot sorts: chunk, the
    # default, and "slots"; GATE_TAIL "up": none, and its W1/W3 launch taking the top-k) and both grouped launches
    # of a one-token moe_layer, PDL on as at one token in the step, and the gate with GATE_TOPK_ROWS 2 (the default
    # 1), with TRACE: no error, no spill, the timers read
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["KERNELBENCH_PDL"] = "1"
    case = {**SMALL, "T": 1}
    import json
    res = subprocess.run([sys.executable, "-c", _COMPILE, json.dumps(case)], env=env, capture_output=True,
                         text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    rows = json.loads(res.stdout.strip().splitlines()[-1])
    kernels = {r["kernel"].split(":")[-1] for r in rows}
    assert kernels == {"_gate_fused_kernel", "_grouped_gemm_kernel"}, rows
    # the gate (two sorts, no tail, the top-k on two rows), W1/W3 (and with the top-k) and W2, for each target
    assert len(rows) == 14, rows
    for r in rows:
        assert not r["error"] and not r["spill"] and r["timer"], r


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU; runs on the device machine "
                    "(scripts/device_gpu_tests.sh)")
@pytest.mark.parametrize("op, T, hashed", [("moe_layer", 1, False), ("moe_layer", 1, True), ("moe_layer", 16, False),
                                           ("moe_routed", 1, False)])
def test_gpu_traced_moe_call_marks_every_program_in_order_and_changes_no_bit(op, T, hashed):
    # (1, True): session 47's first timeline run faulted replaying the hash-routed layer while the rows came from
    # the caching allocator per launch (a first mark, stored before the PDL wait, into a buffer the previous call's
    # W2 still used); the rows now come from the recording's own arena. moe_routed: the step's form
    # (scripts/moe_timeline.py --op moe_routed), the TP8 slice of the shared expert inside the routed launches
    from kernelbench.harness.timing import capture_graph
    registry.load_builtin()
    spec, impl = registry.get_op(op), registry.get_impl(op, "triton")
    params = {"T": T, "D": 4096, "E": 256, "El": 32, "offset": 96, "F": 2048, "K": 6, "V": 8192, "hash": hashed,
              "rs": 1.5, **({"shared": True, "Fs": 256} if op == "moe_routed" else {})}
    inp = impl.prepared(spec.make_inputs(params, torch.Generator().manual_seed(3), "cuda", "normal"))
    want = impl.fn(**inp).clone()
    with trace.recording() as rec:
        graph, (out,) = capture_graph([lambda: impl.fn(**inp)], 4)
        rec.keep_last_calls(5, 4)                                  # the warm-up call's, then the graph's four
        rec.reset()
        graph.replay()
        torch.cuda.synchronize()
        snap = rec.snapshot()
    assert torch.equal(out, want)
    labels = [s["label"] for s in snap]
    assert labels.count("moe W1/W3") == 4 and labels.count("moe W2") == 4, labels
    for s in snap:
        rows = s["rows"]
        ns = rows[:, :4]
        assert (ns > 0).all(), (s["label"], int((ns <= 0).sum()))           # every program reached every mark
        assert (ns[:, 1:] >= ns[:, :-1]).all(), s["label"]                  # start <= released <= finish <= end
        assert (rows[:, 8] >= 0).all()              # %smid (ids need not be contiguous: no upper bound)
        if s["label"] != "moe gate (one launch)":       # one token: the shared expert's items are in the launch;
            kinds = set(rows[:, 9].tolist())             # 16 tokens: routed items with work (the shared one beside)
            assert kinds <= {0, 1, 2} and (0 if T == 1 else 1) in kinds, (s["label"], kinds)
        st = rows[:, trace.FIELDS["ns_step0"]:trace.FIELDS["ns_step0"] + trace.STEPS]
        if s["label"] in ("moe W1/W3", "moe W2") and T == 1:   # the finishing programs: ticket won, block stored
            fin = st[:, 1] >= 0
            assert fin.any() and (st[fin, 2] >= st[fin, 1]).all() and (st[fin, 1] >= ns[fin, 2]).all(), s["label"]
            assert (ns[fin, 3] >= st[fin, 2]).all(), s["label"]
        if s["label"] == "moe gate (one launch)" and T == 1 and not hashed:   # its last program's steps 0 .. 4
            last = st[:, 0] >= 0
            assert int(last.sum()) == 1 and (st[last, 1:5] >= st[last, 0:4]).all(), st[last]


def test_moe_timeline_summary_reads_marks_steps_and_the_call_period():
    """scripts/moe_timeline.py's summary on made-up rows: two replays of two calls, each call one launch of two
    programs (one per kind): times are us from the call's first start mark, medians over calls, the call period is
    the gap between calls' first marks, the finest timer step is the smallest gap between distinct mark values, and
    sub-step marks give the latest program's; marks left at -1 count as unreached."""
    import importlib.util
    from pathlib import Path
    path = Path(__file__).resolve().parents[1] / "scripts" / "moe_timeline.py"
    spec = importlib.util.spec_from_file_location("moe_timeline", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    F = trace.FIELDS

    def call(t0: int, late: int) -> dict:
        rows = torch.full((2, trace.SLOTS), -1, dtype=torch.int64)
        for p, (kind, marks) in enumerate(((1, (0, 1000, 3000, 4000)), (2, (32, 1032, -1, 1500 + late)))):
            for m, v in zip(trace.MARKS, marks):
                rows[p, F[f"ns_{m}"]] = t0 + v if v >= 0 else -1
                rows[p, F[f"clk_{m}"]] = 10 * v if v >= 0 else -1
            rows[p, F["kind"]] = kind
        rows[0, F["ns_step0"]] = t0 + 2000
        return {"label": "moe W1/W3", "rows": rows}
    snaps = [[call(0, 0), call(10_000, 100)], [call(50_000, 0), call(60_000, 100)]]
    out = mod.summarise(snaps, 1)
    assert out["call_period_us"] == {"min": 10.0, "med": 10.0, "max": 10.0}
    assert out["timer_step_ns"] == 32
    rows = {r["kind"]: r for r in out["launches"]}
    routed, idle = rows["routed"], rows["idle"]
    assert routed["released"] == {"first": 1.0, "med": 1.0, "last": 1.0}
    assert routed["steps"] == {0: 2.0} and idle["steps"] == {}
    assert idle["end"]["med"] == pytest.approx(1.55)              # ends at 1.5 and 1.6 us: the median of the calls
    assert idle["unreached_marks"] == 4 and routed["unreached_marks"] == 0
    assert routed["busy_cycles"]["med"] == 30_000                 # clk end - clk released
