"""Programmatic dependent launch (kernels/common.py `pdl_args`, `l2_prefetch_rows`, `pdl_enter`): the switch, that
every launch passing `pdl_args` launches a kernel that waits before it touches the step's data, the PDL builds for
sm_120 (prefetch and wait in the PTX, no spills, the default build's shared memory), and (GPU) that the step with
PDL equals the step without it bit for bit, eager and CUDA-graph replayed."""
from __future__ import annotations

import ast
import pathlib

import pytest
import torch

from kernelbench.kernels import common

KERNELS = pathlib.Path(common.__file__).parent


def test_pdl_switch(monkeypatch):
    """Default "auto": on at one token only (the H200 measurements in docs/perf/pdl.md); "1" at every token count,
    "0" never; never in the interpreter or on a device other than CUDA / CPU (compiled CPU tensors: the
    inspector's capture); anything else is refused."""
    monkeypatch.delenv(common.PDL_ENV, raising=False)
    monkeypatch.setattr(common, "INTERPRET", False)
    on = {"PDL": True, "launch_pdl": True}
    assert common.pdl_args("cpu", 1) == on and common.PDL_MAX_TOKENS == 1
    assert common.pdl_args("cpu", 2) == {} and common.pdl_args("meta", 1) == {}
    monkeypatch.setenv(common.PDL_ENV, "1")
    assert common.pdl_args("cpu", 64) == on
    monkeypatch.setenv(common.PDL_ENV, "0")
    assert common.pdl_args("cpu", 1) == {}
    monkeypatch.setenv(common.PDL_ENV, "1")
    monkeypatch.setattr(common, "INTERPRET", True)
    assert common.pdl_args("cpu", 1) == {}
    monkeypatch.setenv(common.PDL_ENV, "2")
    with pytest.raises(ValueError, match="KERNELBENCH_PDL must be one of auto, 0, 1"):
        common.pdl_args("cpu", 1)


def test_pdl_needs_bulk_prefetchable_rows(monkeypatch):
    """A kernel that bulk-prefetches rows gets PDL only when each such tensor starts 16-byte aligned with rows (and
    outer strides) of whole 16-byte multiples; otherwise it runs its default build."""
    monkeypatch.setattr(common, "INTERPRET", False)
    monkeypatch.delenv(common.PDL_ENV, raising=False)
    w = torch.zeros(8, 64, dtype=torch.bfloat16)
    assert common.bulk_rows_ok(w) and common.pdl_args("cpu", 1, w) == {"PDL": True, "launch_pdl": True}
    assert not common.bulk_rows_ok(w.view(-1)[1:257].view(2, 128))          # starts 2 bytes in
    assert not common.bulk_rows_ok(torch.zeros(8, 60, dtype=torch.bfloat16))  # 120-byte rows
    assert not common.bulk_rows_ok(torch.zeros(8, 68, dtype=torch.bfloat16)[:, :64])   # 136-byte row stride
    assert common.pdl_args("cpu", 1, w, torch.zeros(8, 60, dtype=torch.bfloat16)) == {}


def _jit_defs() -> dict[str, ast.FunctionDef]:
    out = {}
    for path in KERNELS.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef) and any("jit" in ast.unparse(d) for d in node.decorator_list):
                out[node.name] = node
    return out


def _calls(fn: ast.FunctionDef) -> set[str]:
    return {ast.unparse(n.func) for n in ast.walk(fn) if isinstance(n, ast.Call)}


def _pdl_launches() -> list[tuple[str, str]]:
    """(file, kernel) of every `kernel[grid](..., **pdl_args(...))` launch in kernels/, and of every launch that sets
    `launch_pdl` itself (the latency probes of kernels/probe.py)."""
    out = []
    for path in KERNELS.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Subscript)
                    and any((k.arg is None and ("pdl_args(" in ast.unparse(k.value)
                                                or "launch_pdl" in ast.unparse(k.value))) or k.arg == "launch_pdl"
                            for k in node.keywords)):
                out.append((path.name, ast.unparse(node.func.value)))
    return out


def test_every_pdl_launch_runs_a_kernel_that_waits_first():
    """A launch with `launch_pdl` may start before its predecessor ends, so its kernel must take PDL and reach
    `pdl_enter(PDL)` (itself or through the GEMM prologue it calls) before its first access to the step's data;
    and a kernel that takes PDL is launched that way somewhere (no dead switch)."""
    defs = _jit_defs()
    launches = _pdl_launches()
    assert len({k for _, k in launches}) >= 12, launches
    waits = {name for name, fn in defs.items() if "pdl_enter" in _calls(fn)}
    for _, kernel in launches:
        fn = defs[kernel]
        assert "PDL" in [a.arg for a in fn.args.args], kernel
        assert "pdl_enter" in _calls(fn) or _calls(fn) & waits, f"{kernel} never calls pdl_enter"
    launched = {k for _, k in launches}
    takes_pdl = {name for name, fn in defs.items() if "PDL" in [a.arg for a in fn.args.args]}
    helpers = {name for name in takes_pdl if name not in launched}
    # _gate_route_kernel takes PDL only to trigger its successor (config UP_EARLY): it is never launched early
    # itself (no launch_pdl at any of its launches: it is not in `launched`), so it needs no wait
    assert helpers == {"fp8_tile_head_ticket", "l2_prefetch_rows", "pdl_enter", "pdl_release",
                       "_gate_route_kernel"}, helpers
    # launching the successor without the wait is an argued exception (pdl_release's doc): the MoE up launch's
    # shared items with SHARED_X "own" (kernels/moe.py _grouped_gemm_kernel XOWN), and the routing launch that is
    # not launched early (its first statement), and nothing else
    assert {name for name, fn in defs.items() if "pdl_release" in _calls(fn)} == {"_grouped_gemm_kernel",
                                                                                   "_gate_route_kernel"}
    first = next(st for st in defs["_gate_route_kernel"].body if not isinstance(st, ast.Expr)
                 or not isinstance(st.value, ast.Constant))
    assert ast.unparse(first) == "pdl_release(PDL)"


def test_pdl_enter_comes_before_any_store_or_atomic():
    """In the launched kernels' own bodies nothing is stored or taken by an atomic before the wait (a prefetch and
    weight loads may precede it)."""
    defs = _jit_defs()
    for _, kernel in _pdl_launches():
        fn = defs[kernel]
        seen_wait = False
        for stmt in fn.body:
            text = ast.unparse(stmt)
            if "pdl_enter(" in text or "fp8_tile_head_ticket(" in text:
                seen_wait = True
                break
            assert "tl.store" not in text and "tl.atomic" not in text, f"{kernel}: {text[:80]} before the wait"
            # the one store allowed: the in-kernel timeline's first mark (kernels/trace.py), into rows of an arena
            # no kernel of the step can see (allocated once by the recording, never from the caching allocator)
            assert "trace_" not in text or text == "trace_mark(trace_ptr, 0, TRACE)", f"{kernel}: {text[:80]}"
        assert seen_wait, f"{kernel}: no pdl_enter at the top level of its body"


CHAIN_OPS = ["fp8_linear", "attention_front", "attention_q", "indexer_q", "mhc_post_pre_norm", "sparse_attention",
             "grouped_wo_a", "sparse_attention_wo_a", "moe_layer", "compressor_step"]
PREFETCHING = {"_fp8_linear_v2_kernel", "_attention_front_kernel", "_attention_q_kernel", "_bf16_gemm_kernel",
               "_gate_fused_kernel", "_comp_step"}


@pytest.mark.timeout(1200)
def test_pdl_builds_fit_sm120(monkeypatch):
    """KERNELBENCH_PDL=1 at one token (the decode step's chain, flash-tp8, default configs) compiled for sm_120:
    every launched kernel waits (griddepcontrol.wait in the PTX), the weight GEMVs also prefetch
    (cp.async.bulk.prefetch.L2), and the PDL build has no problem (spills, shared memory) and the shared memory of
    the default build (the MoE up launch: up to 8 KB more, its shared items' x quantization, XOWN)."""
    from kernelbench import registry
    from kernelbench.harness import inspector
    jobs = []
    for op in CHAIN_OPS:                 # the op's first one-token flash-tp8 case, its default config
        spec = registry.get_op(op)
        params = next(p for p in spec.shape_cases("flash-tp8") if spec.batch(p) == 1
                      and p.get("ratio", 128) == 128)        # the compressor: the case whose default is one launch
        jobs.append((op, "triton", params, None))
    monkeypatch.setenv(common.PDL_ENV, "1")
    on = inspector.inspect_jobs(jobs, target="sm_120", tensor_core_ops=())   # tensor cores: test_sm120.py
    monkeypatch.setenv(common.PDL_ENV, "0")
    off = inspector.inspect_jobs(jobs, target="sm_120", tensor_core_ops=())
    assert len(on) == len(off) >= len(CHAIN_OPS)
    names = set()
    for a, b in zip(on, off):
        assert not a.get("error") and not a["problems"], (a["op"], a.get("error"), a["problems"])
        assert [k["kernel"] for k in a["kernels"]] == [k["kernel"] for k in b["kernels"]]
        for ka, kb in zip(a["kernels"], b["kernels"]):
            name = ka["kernel"].split(":")[1]
            names.add(name)
            assert kb["pdl"] == "", name
            assert ka["pdl"] in ("wait", "prefetch+wait"), (a["op"], name, ka["pdl"])
            if name in PREFETCHING:
                assert ka["pdl"] == "prefetch+wait", (a["op"], name, ka["pdl"])
            assert ka["spill_bytes"] == 0, (a["op"], name)
            if name == "_grouped_gemm_kernel":     # the up launch's shared items quantize x in registers (XOWN):
                assert kb["shared_bytes"] <= ka["shared_bytes"] <= kb["shared_bytes"] + 8192, (a["op"], name)
            else:                                  # the same kernel plus the prefetch and the wait
                assert ka["shared_bytes"] == kb["shared_bytes"], (a["op"], name)
    assert PREFETCHING <= names, names


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU; runs on the device machine "
                    "(scripts/device_gpu_tests.sh rest)")
@pytest.mark.parametrize("c", [1, 16, 64])
def test_gpu_pdl_changes_no_bit(c, monkeypatch):
    """Flash TP8 rank-0 widths, layers swa, csa, hca, csa, Triton kernels, both side-stream sites: the step with
    KERNELBENCH_PDL=1 (eager, and replayed from a CUDA graph captured with it: programmatic edges) equals the step
    without PDL bit for bit (logits, streams, every cache tensor). Same kernels, same order of every reduction: a
    difference can only be a read before the predecessor's write landed."""
    from test_lanes import _step_outputs

    from kernelbench.decoder import decode_bench as db
    from kernelbench.decoder.tp import TPContext
    dev = torch.device("cuda")
    cfg = db.bench_config("flash", "swa,csa,hca,csa")
    model = db.random_model(TPContext(rank=0, world=8, simulate=True), cfg, "triton", dev, seed=0)
    monkeypatch.setenv(common.PDL_ENV, "0")
    off = _step_outputs(model, c, graph=True)
    monkeypatch.setenv(common.PDL_ENV, "1")
    assert common.pdl_on(dev, c)
    eager, graph = _step_outputs(model, c, graph=False), _step_outputs(model, c, graph=True)
    for a, b, g in zip(off, eager, graph):
        assert torch.equal(a, b) and torch.equal(a, g)
    assert torch.isfinite(off[0]).all()
