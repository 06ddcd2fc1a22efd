"""The sm_120 inspector on toy kernels, without a GPU: launches are captured (not run), compiled for
GPUTarget("cuda", 120, 32), and shared memory, registers, spills and tensor-core instructions are
read from what the compiler made."""
from pathlib import Path

import pytest
import torch

from kernelbench.harness import inspector
from kernelbench import registry
from kernelbench.usage import UsageProblem

TOY = str(Path(__file__).with_name("kb_toy.py"))
PARAMS = {"M": 16, "N": 64, "K": 128}
SMALL = {"BLOCK_N": 32, "BLOCK_K": 32, "num_warps": 4, "num_stages": 2}
MID = {"BLOCK_N": 128, "BLOCK_K": 128, "num_warps": 4, "num_stages": 3}      # between sm_120's and sm_90's limits
HUGE = {"BLOCK_N": 256, "BLOCK_K": 256, "num_warps": 4, "num_stages": 4}


@pytest.fixture(scope="module")
def toy():
    registry.load_module(TOY)
    return registry.get_op("toy_mm")


@pytest.fixture(scope="module")
def reports(toy):
    jobs = [("toy_mm", "triton", PARAMS, SMALL), ("toy_mm", "triton", PARAMS, MID), ("toy_mm", "triton", PARAMS, HUGE),
            ("toy_mm", "simt", PARAMS, SMALL), ("toy_mm", "torch_only", PARAMS, None)]
    sm120 = inspector.inspect_jobs(jobs, target="sm_120", modules=(TOY,), tensor_core_ops=("toy_mm",))
    sm90 = inspector.inspect_jobs(jobs[:3], target="sm_90", modules=(TOY,), tensor_core_ops=("toy_mm",))
    return sm120, sm90


def test_capture_records_launches_without_running_them(toy):
    impl = registry.get_impl("toy_mm", "triton")
    inputs = toy.make_inputs(PARAMS, torch.Generator().manual_seed(0), "cpu", "normal")
    with inspector.capture() as launches:
        y = impl.fn(**inputs, config=SMALL)
    assert len(launches) == 1
    (launch,) = launches
    assert launch.name.endswith(":toy_mm_kernel")
    assert launch.grid == (2,)                     # N=64 / BLOCK_N=32
    assert launch.kwargs["BLOCK_N"] == 32 and launch.kwargs["num_warps"] == 4 and launch.kwargs["BLOCK_M"] == 16
    assert launch.args[0] is inputs["x"]
    # nothing ran: the output is whatever torch.empty left, not the product
    assert not torch.allclose(y, toy.reference(**inputs))
    # and outside the context the kernel runs again
    y = impl.fn(**inputs, config=SMALL)
    torch.testing.assert_close(y, toy.reference(**inputs), rtol=1e-4, atol=1e-4)


def test_dot_kernel_fits_sm120_and_uses_tensor_cores(reports):
    rep = reports[0][0]
    assert rep["problems"] == [], rep["problems"]
    (k,) = rep["kernels"]
    assert 0 < k["shared_bytes"] <= 101376
    assert k["registers"] > 0 and not k["spills"]
    assert any(i.startswith("mma.sync") for i in k["ptx_mma"])
    assert any(i.startswith("HMMA") for i in k["sass_mma"])
    assert k["constexprs"]["BLOCK_N"] == 32 and k["num_warps"] == 4
    assert k["sass_instructions"] > k["local_ops"] + len(k["sass_mma"])    # the SASS's size, NOPs left out


def test_hadamard_switch_reaches_the_compiled_kernels(monkeypatch):
    """KERNELBENCH_HADAMARD (read at import: the inspector's compile process, started after it is set, builds with
    it): with the default (butterfly) indexer_q's one-token epilogue compiles to under half the SASS of the
    sign-matrix form (`matrix`, sm_120), both without spills; a value outside matrix / butterfly is a usage error
    naming the variable."""
    from kernelbench.kernels import common
    from kernelbench.usage import UsageProblem
    registry.load_builtin()
    monkeypatch.setenv("TRITON_INTERPRET", "1")        # each inspect_jobs call compiles in a fresh subprocess
    case = {"T": 1, "Qr": 1024, "Hi": 8, "R": 64, "ctx": 8192, "ragged": False}
    job = [("indexer_q", "triton", case, None)]

    def epilogue():
        (rep,) = inspector.inspect_jobs(job, target="sm_120")
        (k,) = [k for k in rep["kernels"] if k["kernel"].endswith("_indexer_q_epilogue")]
        assert not k["error"] and not k["spills"]
        return k["sass_instructions"]
    monkeypatch.delenv("KERNELBENCH_HADAMARD", raising=False)
    default = epilogue()
    monkeypatch.setenv("KERNELBENCH_HADAMARD", "matrix")
    assert 0 < 2 * default < epilogue()
    monkeypatch.setenv("KERNELBENCH_HADAMARD", "fast")
    with pytest.raises(UsageProblem, match="KERNELBENCH_HADAMARD"):
        common.hadamard_mode()


def test_sass_size_tells_the_hadamard_butterfly_from_the_sign_product():
    """The inspector's SASS instruction count on a real pair (session 19): the hadamard op's kernel as the
    seven-stage butterfly (config FWHT) is under half the code of the product with a Sylvester tile built in
    registers (sm_120: about 340 against 1,240 instructions at 16 rows)."""
    registry.load_builtin()
    base = {"BLOCK_M": 16, "num_warps": 4, "num_stages": 1}
    jobs = [("hadamard", "triton", {"T": 16, "H": 1}, {**base, "FWHT": fwht}) for fwht in (False, True)]
    product, butterfly = (r["kernels"][0] for r in inspector.inspect_jobs(jobs, target="sm_120"))
    assert not product["error"] and not butterfly["error"]
    assert 0 < 2 * butterfly["sass_instructions"] < product["sass_instructions"]


def test_shared_memory_limit_depends_on_the_target(reports):
    sm120, sm90 = reports
    mid120, huge120 = sm120[1], sm120[2]
    assert 101376 < mid120["max_shared"] <= 232448
    assert any("shared memory" in p and "101376" in p for p in mid120["problems"])
    assert sm90[1]["problems"] == []               # fits Hopper's 227 KB
    assert any("232448" in p for p in sm90[2]["problems"])
    assert any("shared memory" in p for p in huge120["problems"])


def test_simt_kernel_is_flagged_where_tensor_cores_are_required(reports):
    simt = reports[0][3]
    assert simt["kernels"] and not simt["tensor_cores"]
    assert all(not k["ptx_mma"] and not k["sass_mma"] for k in simt["kernels"])
    assert any("tensor-core" in p for p in simt["problems"])


def test_an_impl_that_launches_no_kernel_is_a_problem(reports):
    rep = reports[0][4]
    assert rep["kernels"] == []
    assert rep["problems"] == ["no Triton launch was captured"]


def test_compile_error_is_reported_not_raised(toy):
    bad = {"BLOCK_N": 32, "BLOCK_K": 48, "num_warps": 4, "num_stages": 2}
    (rep,) = inspector.inspect_jobs([("toy_mm", "triton", PARAMS, bad)], modules=(TOY,))
    assert rep["kernels"][0]["error"]
    assert any("compile failed" in p for p in rep["problems"])


def test_capture_for_a_target_sizes_grids_by_its_sm_count():
    """Wrappers size grids by `sm_count`, which says 4 for CPU tensors: a capture for a target sees the card's count
    (inspector.TARGET_SMS) and leaves the wrappers' own afterwards. csa_indices' score launch at 64 tokens, waves 4:
    ceil(4 * SMs / 64) programs a token."""
    from kernelbench.kernels import indexer as KI
    spec, impl = registry.get_op("csa_indices"), registry.get_impl("csa_indices", "triton")
    params = {"T": 64, "Hi": 64, "topk": 512, "ctx": 512, "cap": 128, "ragged": False, "W": 128}
    cfg = {**KI.indexer_default({}), "waves": 4}

    def scores_grid(sms):
        (launch,) = [l for l in inspector.capture_impl(impl, spec, params, cfg, sms) if l.name.endswith(":_index_scores")]
        return tuple(launch.grid)
    assert scores_grid(inspector.TARGET_SMS["sm_120"]) == (64, 12)        # 188 SMs
    assert scores_grid(inspector.TARGET_SMS["sm_90"]) == (64, 9)          # 132 SMs
    assert scores_grid(None) == (64, 1)                                   # the CPU's 4
    assert KI.sm_count(torch.device("cpu")) == 4


def test_programs_per_sm_take_the_scarcest_resource():
    """SMLimits.programs: the programs one SM holds at once, by shared memory (with the runtime's 1 KB a block),
    registers (a warp's in units of 256), warps and the block cap. The numbers of session 32: csa_indices' score
    launch at 64K tokens holds two programs of 4 warps on sm_90 and one on sm_120; 64-key blocks at 8 warps and 2
    stages four on sm_90."""
    from kernelbench.harness.devices import SM_LIMITS
    sm90, sm120 = SM_LIMITS[90], SM_LIMITS[120]
    assert sm90.programs(4, 121, 114_944) == 2                   # shared: 2 x 115,968 <= 233,472 < 3 x
    assert sm120.programs(4, 236, 82_944) == 1                   # shared: 100 KB an SM
    assert sm90.programs(8, 58, 49_664) == 4                     # shared again
    assert sm90.programs(8, 255, 0) == 1                         # registers: 256 x 32 x 8 = the whole file
    assert sm90.programs(4, 129, 0) == 3                         # 129 -> 136 a thread: 17,408 a program
    assert sm120.programs(16, 32, 0) == 3                        # warps: 48 an SM on sm_120
    assert sm90.programs(16, 32, 0) == 4                         # 64 on sm_90
    assert sm90.programs(1, 16, 0) == 32                         # the block cap
    assert sm120.programs(4, 64, 101_376) == 1 and sm120.programs(4, 64, 102_000) == 0   # past the SM: none
    assert sm90.programs(0, 64, 0) == 0


def test_reports_give_programs_per_sm_for_their_target(reports):
    """inspect's reports carry each kernel's programs per SM for the report's target, from its own registers,
    warps and shared memory; none for the MID toy tile on sm_120 (past its shared memory)."""
    from kernelbench.harness.devices import SM_LIMITS
    sm120, sm90 = reports
    for rep, arch in ((sm120[0], 120), (sm90[0], 90), (sm90[1], 90)):
        (k,) = rep["kernels"]
        assert k["programs_per_sm"] == SM_LIMITS[arch].programs(k["num_warps"], k["registers"], k["shared_bytes"])
        assert k["programs_per_sm"] >= 1
    assert sm120[1]["kernels"][0]["shared_bytes"] > 101_376 and sm120[1]["kernels"][0]["programs_per_sm"] == 0


def test_workers_split_the_jobs_and_keep_their_order(reports, monkeypatch):
    """Several workers compile contiguous slices side by side and the reports come back in job order, the same as
    one worker's (`reports` above ran with the default count); KERNELBENCH_INSPECT_WORKERS sets the count, never
    above the jobs, and anything but a positive integer is refused; by default the CPUs are shared among
    pytest-xdist's workers, at most MAX_WORKERS."""
    assert [list(r) for r in inspector._slices(5, 2)] == [[0, 1, 2], [3, 4]]
    assert [list(r) for r in inspector._slices(2, 4)] == [[0], [1]]
    jobs = [("toy_mm", "triton", PARAMS, SMALL), ("toy_mm", "triton", PARAMS, HUGE),
            ("toy_mm", "simt", PARAMS, SMALL)]
    one = inspector.inspect_jobs(jobs, target="sm_120", modules=(TOY,), tensor_core_ops=("toy_mm",), workers=1)
    three = inspector.inspect_jobs(jobs, target="sm_120", modules=(TOY,), tensor_core_ops=("toy_mm",), workers=3)
    keys = ("impl", "config", "problems")
    assert [{k: r[k] for k in keys} for r in three] == [{k: r[k] for k in keys} for r in one]
    assert [k["registers"] for r in three for k in r["kernels"]] == [k["registers"] for r in one for k in r["kernels"]]
    assert one[1]["problems"] and not one[0]["problems"]       # HUGE does not fit sm_120's shared memory
    monkeypatch.setenv("KERNELBENCH_INSPECT_WORKERS", "3")
    assert inspector.inspect_workers(10) == 3 and inspector.inspect_workers(2) == 2
    for bad in ("0", "-2", "many"):
        monkeypatch.setenv("KERNELBENCH_INSPECT_WORKERS", bad)
        with pytest.raises(UsageProblem, match="KERNELBENCH_INSPECT_WORKERS must be a positive integer"):
            inspector.inspect_workers(4)
    monkeypatch.delenv("KERNELBENCH_INSPECT_WORKERS")
    monkeypatch.setattr(inspector.os, "cpu_count", lambda: 64)
    monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", "8")
    assert inspector.inspect_workers(100) == 8 and inspector.inspect_workers(3) == 3
    monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", "128")
    assert inspector.inspect_workers(100) == 1
    monkeypatch.delenv("PYTEST_XDIST_WORKER_COUNT")
    assert inspector.inspect_workers(100) == inspector.MAX_WORKERS


def test_a_kernel_compiled_once_reports_each_launch_its_own_grid(toy):
    """Two cases whose launches compile to one binary (N a runtime int, 64 and 128 alike divisible by 16) share the
    compile in one worker, but each report keeps its own launch's grid (cdiv(N, BLOCK_N)): the reused report's grid
    was the first case's, so a full inspection's grids depended on the job order and the worker slices."""
    jobs = [("toy_mm", "triton", {**PARAMS, "N": n}, SMALL) for n in (64, 128)]
    a, b = inspector.inspect_jobs(jobs, target="sm_120", modules=(TOY,), tensor_core_ops=("toy_mm",), workers=1)
    (ka,), (kb,) = a["kernels"], b["kernels"]
    assert ka["registers"] == kb["registers"] and ka["sass_instructions"] == kb["sass_instructions"]
    assert ka["grid"][0] == 2 and kb["grid"][0] == 4


def test_sass_mix_reports_a_kernels_resources_as_inspect_counts_them():
    """scripts/sass_mix.py (the SASS instruction mix of an op's kernels, no GPU) prints each kernel's registers,
    shared memory, spills and programs an SM; the programs follow from the printed resources by the inspector's
    SM_LIMITS rule, and the instruction total is non-zero with the kernel's FMULs among the opcodes shown."""
    import re
    import subprocess
    import sys
    from kernelbench.harness.devices import SM_LIMITS
    script = Path(__file__).resolve().parents[1] / "scripts" / "sass_mix.py"
    out = subprocess.run([sys.executable, str(script), "rms_norm", "--arch", "120"], capture_output=True, text=True,
                         timeout=300, check=True).stdout
    m = re.search(r"_rms_norm_kernel: (\d+) registers, (\d+) B shared, (\d+) B spilled, (\d+) x (\d+) warps an SM, "
                  r"(\d+) instructions; (.+)", out)
    assert m, out
    regs, shared, spilled, per_sm, warps, total = map(int, m.groups()[:6])
    assert regs > 0 and spilled == 0 and total > 0
    assert per_sm == SM_LIMITS[120].programs(warps, regs, shared) >= 1
    assert "FMUL" in m.group(7)
