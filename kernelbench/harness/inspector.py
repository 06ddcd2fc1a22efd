"""The sm_120 / sm_90 inspector: compile every Triton kernel an implementation launches, for a GPU we
do not have, and read what the compiler made of it. No GPU is needed.

How kernels are found: the implementation's wrapper runs on CPU tensors of the real shapes inside
`capture()`, which replaces `JITFunction.run` (and the interpreter's launcher under
TRITON_INTERPRET=1) with a recorder: each `kernel[grid](*args, CONSTS=..., num_warps=, num_stages=)`
becomes a `Launch` (function, grid, args, keyword arguments) and nothing executes. Each launch is
then specialised exactly as Triton would at run time (its own binder infers the signature from the
arguments: tensor dtypes -> "*bf16"/"*fp8e4nv"/..., ints -> "i32"/"i64", 16-byte divisibility) and
compiled with `triton.compile(ASTSource(...), target=GPUTarget("cuda", arch, 32))`.

What is read: shared memory (Triton's dynamic allocation, the number a launch must fit under the
101,376 bytes of sm_120), registers, stack frame and local-memory traffic (spills) from
`cuobjdump -res-usage` / `-sass` of the cubin, and the tensor-core instructions in PTX (mma.sync,
wgmma, tcgen05.mma) and SASS (HMMA, QMMA, OMMA, IMMA, HGMMA, ...). A kernel on CUDA cores where it
should be on tensor cores is how our users lost 77% of a decode step without noticing. And the plain global loads
inside loops that are read in their own iteration (`sass_loops`: the latency a warp waits out there unless the
compiler's pipeline or a load a step ahead hides it; `kernelbench inspect --loop-loads` lists them).

Compiling needs real `JITFunction`s: under TRITON_INTERPRET=1 `triton.jit` returns interpreter
objects that the compiler rejects, so `inspect_impls` then re-runs itself in a subprocess with the
interpreter off (tests run that way).
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Iterator

import torch

from kernelbench import registry
from kernelbench.harness import sass_loops
from kernelbench.harness.devices import SM_LIMITS, SM120_SMEM_PER_BLOCK, SM90_SMEM_PER_BLOCK

TARGETS = {"sm_120": 120, "sm_90": 90, "sm_100": 100}
SMEM_LIMIT = {120: SM120_SMEM_PER_BLOCK, 90: SM90_SMEM_PER_BLOCK, 100: SM90_SMEM_PER_BLOCK}
# Ops whose kernels must run on tensor cores: the GEMMs and attention of the decode step.
TENSOR_CORE_OPS = ("fp8_linear", "moe_experts", "sparse_attention", "indexer_topk", "attention_front", "attention_q")
PTX_MMA = re.compile(r"\b(mma\.sync\.aligned\.[\w.]+|wgmma\.mma_async[\w.]*|tcgen05\.mma[\w.]*)")
SASS_MMA = re.compile(r"\b((?:HMMA|IMMA|QMMA|OMMA|HGMMA|IGMMA|QGMMA|UTC\w*MMA)[\w.]*)")
SASS_LOCAL = re.compile(r"\b(LDL|STL)(?:\.[\w.]+)?\s")
SASS_INSTRUCTION = re.compile(r"^\s+/\*[0-9a-f]{4,}\*/\s+(?!NOP\b)\S", re.MULTILINE)   # an instruction line, not a NOP


class InspectorError(RuntimeError):
    pass


@dataclass
class Launch:
    fn: Any            # the JITFunction (or InterpretedFunction under the interpreter)
    name: str          # module:qualname of the kernel
    grid: tuple
    args: tuple
    kwargs: dict


@dataclass
class KernelReport:
    kernel: str
    grid: list
    constexprs: dict
    num_warps: int
    num_stages: int
    shared_bytes: int = 0
    registers: int = 0
    stack_bytes: int = 0
    local_bytes: int = 0
    local_ops: int = 0           # LDL/STL instructions in the SASS
    spill_bytes: int = 0         # ptxas -v: spill stores + spill loads
    ptx_mma: list = field(default_factory=list)
    sass_mma: list = field(default_factory=list)
    pdl: str = ""                # a PDL build (KERNELBENCH_PDL=1): "wait", or "prefetch+wait" with L2 prefetches
    error: str = ""
    sass_instructions: int = 0   # instructions in the cubin's SASS, NOPs left out: code size, not instructions run
    # plain global loads inside loops (sass_loops.summary): those read in their own iteration (address, opcode,
    # instructions to the first reader, nearest first) and how many are read in the next
    loop_loads: dict = field(default_factory=dict)

    @property
    def spills(self) -> bool:
        """Registers spilled to local memory (ptxas). A stack frame or a local array alone is not a
        spill; LOCAL > 0 (local arrays) is reported separately as local memory traffic."""
        return self.spill_bytes > 0

    @property
    def tensor_cores(self) -> bool:
        return bool(self.ptx_mma or self.sass_mma)


@dataclass
class ImplReport:
    op: str
    impl: str
    target: str
    params: dict
    config: dict
    kernels: list[KernelReport] = field(default_factory=list)
    error: str = ""

    @property
    def max_shared(self) -> int:
        return max((k.shared_bytes for k in self.kernels), default=0)

    @property
    def tensor_cores(self) -> bool:
        return any(k.tensor_cores for k in self.kernels)

    def problems(self, smem_limit: int, require_tensor_cores: bool | None = None) -> list[str]:
        """Why this implementation/config is not fit for the target; empty when fit."""
        out = [self.error] if self.error else []
        if not self.kernels and not self.error:
            out.append("no Triton launch was captured")
        for k in self.kernels:
            if k.error:
                out.append(f"{k.kernel}: compile failed: {k.error}")
            elif k.shared_bytes > smem_limit:
                out.append(f"{k.kernel}: {k.shared_bytes} bytes of shared memory > {smem_limit}")
            elif k.spills:
                out.append(f"{k.kernel}: spills {k.spill_bytes} bytes of registers (stack {k.stack_bytes} B, "
                           f"{k.local_ops} LDL/STL)")
        need = self.op in TENSOR_CORE_OPS if require_tensor_cores is None else require_tensor_cores
        if need and self.kernels and not self.tensor_cores:
            out.append("no tensor-core instruction (mma/wgmma, HMMA/QMMA/OMMA) in any kernel")
        return out

    def as_dict(self) -> dict:
        d = asdict(self)
        d["max_shared"] = self.max_shared
        d["tensor_cores"] = self.tensor_cores
        limits = SM_LIMITS.get(TARGETS.get(self.target, 0))
        for k, kd in zip(self.kernels, d["kernels"]):
            kd["spills"], kd["tensor_cores"] = k.spills, k.tensor_cores
            # programs resident on one SM of the target (0: unknown target or not compiled): with num_warps, how
            # many warps an SM has to hide latencies with
            kd["programs_per_sm"] = (limits.programs(k.num_warps, k.registers, k.shared_bytes)
                                     if limits and not k.error and k.registers else 0)
        return d


# --- capture ------------------------------------------------------------------------------------

def _permissive_check_device(*tensors):
    devs = {t.device for t in tensors if isinstance(t, torch.Tensor)}
    return devs.pop() if len(devs) == 1 else torch.device("cpu")


# SMs of the card each target stands for: the wrappers size grids and splits by `sm_count` (kernels/attention.py), which
# on a CPU tensor says 4 (the interpreter's small grids); a capture for a target sizes them as that card would
TARGET_SMS = {"sm_120": 188, "sm_90": 132, "sm_100": 148}   # RTX PRO 6000 Blackwell, H100 / H200 SXM, B200


@contextlib.contextmanager
def capture(sms: int | None = None) -> Iterator[list[Launch]]:
    """Record Triton launches instead of running them (compiled and interpreted launchers both). `sms`: the SM count
    the kernel wrappers see for CPU tensors while capturing (default: theirs, 4)."""
    from triton.runtime.jit import JITFunction

    from kernelbench.upstream import require_launcher_run
    launches: list[Launch] = []

    def record(self, *args, grid, warmup, **kwargs):
        if warmup:
            return None
        fn = getattr(self, "fn", self)
        name = f"{getattr(fn, '__module__', '?')}:{getattr(fn, '__qualname__', getattr(fn, '__name__', '?'))}"
        launches.append(Launch(self, name, grid, args, dict(kwargs)))
        return None

    require_launcher_run(JITFunction)
    patches = [(JITFunction, "run", JITFunction.run)]
    try:
        from triton.runtime.interpreter import InterpretedFunction
    except ImportError:
        pass
    else:
        require_launcher_run(InterpretedFunction)
        patches.append((InterpretedFunction, "run", InterpretedFunction.run))
    # Kernel wrappers refuse CPU tensors outside the interpreter; during capture nothing runs.
    common = sys.modules.get("kernelbench.kernels.common")
    if common is not None:
        for mod in list(sys.modules.values()):
            if getattr(mod, "check_device", None) is common.check_device:
                patches.append((mod, "check_device", common.check_device))
    attention = sys.modules.get("kernelbench.kernels.attention")
    if sms is not None and attention is not None:
        for mod in list(sys.modules.values()):
            if getattr(mod, "sm_count", None) is attention.sm_count:
                patches.append((mod, "sm_count", attention.sm_count))
    own = {"check_device": _permissive_check_device, "sm_count": lambda device: sms}
    for owner, attr, _ in patches:
        setattr(owner, attr, own.get(attr, record))
    try:
        yield launches
    finally:
        for owner, attr, orig in patches:
            setattr(owner, attr, orig)


BIG = 1 << 20   # elements; random tensors above this are filled cheaply while capturing


def _size(args, kwargs) -> tuple:
    size = kwargs.get("size", args[0] if len(args) == 1 and isinstance(args[0], (tuple, list, torch.Size)) else args)
    return tuple(size)


@contextlib.contextmanager
def cheap_random() -> Iterator[None]:
    """While capturing nothing runs, so the values of big inputs (weights) do not matter: draw them
    as constants instead of random numbers (full Flash shapes take tens of seconds to draw on a CPU).
    Small tensors (indices, positions, routing) stay random: inputs are built from them."""
    orig = {n: getattr(torch, n) for n in ("randn", "rand", "randint")}

    def numel(shape) -> int:
        n = 1
        for d in shape:
            n *= int(d)
        return n

    def randn(*args, **kw):
        shape = _size(args, kw)
        if numel(shape) <= BIG:
            return orig["randn"](*args, **kw)
        return torch.ones(shape, dtype=kw.get("dtype") or torch.float32, device=kw.get("device"))

    def rand(*args, **kw):
        shape = _size(args, kw)
        if numel(shape) <= BIG:
            return orig["rand"](*args, **kw)
        return torch.full(shape, 0.5, dtype=kw.get("dtype") or torch.float32, device=kw.get("device"))

    def randint(*args, **kw):
        pos = list(args)
        size = kw.get("size") or pos.pop()
        low = pos[0] if len(pos) == 2 else kw.get("low", 0)
        if numel(size) <= BIG:
            return orig["randint"](*args, **kw)
        return torch.full(tuple(size), low, dtype=kw.get("dtype") or torch.int64, device=kw.get("device"))

    torch.randn, torch.rand, torch.randint = randn, rand, randint
    try:
        yield
    finally:
        for n, f in orig.items():
            setattr(torch, n, f)


def capture_impl(impl: registry.Impl, spec: registry.OpSpec, params: dict, config: dict | None,
                 sms: int | None = None) -> list[Launch]:
    gen = torch.Generator().manual_seed(0)
    with cheap_random():
        inputs = spec.make_inputs(params, gen, "cpu", "normal")
    kw = {"config": config} if config is not None else {}
    inputs = impl.prepared(inputs)          # the load-time weight layout the implementation runs on
    with capture(sms) as launches, torch.no_grad():
        impl.fn(**inputs, **kw)
    return launches


# --- compile and read ---------------------------------------------------------------------------

def _tool(name: str) -> str:
    import triton
    path = getattr(getattr(triton.knobs.nvidia, name, None), "path", None)
    if not path:
        raise InspectorError(f"{name} not found (it ships with Triton under triton/backends/nvidia/bin)")
    return path


def _bind(launch: Launch, arch: int):
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import make_backend
    from triton.runtime.jit import JITFunction, create_function_from_signature
    fn = launch.fn
    if not isinstance(fn, JITFunction):
        raise InspectorError(f"{launch.name} is not a compiled-mode JITFunction (TRITON_INTERPRET=1?): "
                             "inspect_impls runs the compile step in a subprocess without the interpreter")
    target = GPUTarget("cuda", arch, 32)
    backend = make_backend(target)
    binder = create_function_from_signature(fn.signature, fn.params, backend)
    kwargs = {k: v for k, v in launch.kwargs.items() if k not in ("debug", "instrumentation_mode")}
    bound, specialization, opts = binder(*launch.args, **kwargs)
    options, signature, constexprs, attrs = fn._pack_args(backend, kwargs, bound, specialization, opts)
    src = triton.compiler.ASTSource(fn=fn, signature=signature, constexprs=constexprs, attrs=attrs)
    grid = launch.grid(bound) if callable(launch.grid) else launch.grid
    named = {fn.arg_names[p[0]]: v for p, v in constexprs.items() if len(p) == 1}
    return src, target, options, list(grid), named


def _cache_dir():
    from pathlib import Path
    d = Path(os.environ.get("KERNELBENCH_INSPECT_CACHE", Path.home() / ".cache" / "kernelbench" / "inspect"))
    d.mkdir(parents=True, exist_ok=True)
    return d


def _run_tool(args: list[str]) -> str:
    proc = subprocess.run(args, capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        raise InspectorError(f"{' '.join(args[:2])} failed: {proc.stderr.strip()[:500]}")
    return proc.stdout + proc.stderr


def cubin_sass(cubin: bytes, tmp: str | None = None) -> str:
    """`cuobjdump -res-usage -sass` of a cubin: its SASS and the REG / STACK / SHARED / LOCAL lines."""
    with tempfile.TemporaryDirectory() as own:
        path = os.path.join(tmp or own, "k.cubin")
        with open(path, "wb") as f:
            f.write(cubin)
        return _run_tool([_tool("cuobjdump"), "-res-usage", "-sass", path])


def binary_facts(cubin: bytes, ptx: str, arch: int) -> dict:
    """Registers, stack, local memory, spill bytes and SASS tensor-core opcodes of a cubin, cached on
    disk by the cubin's hash (cuobjdump is slow to start; the same kernel recurs across shapes).
    ptxas -v on the PTX settles spills only when the stack or local memory is non-zero (a stack
    frame alone is not a spill)."""
    digest = hashlib.sha256(cubin).hexdigest()
    cached = _cache_dir() / f"{digest}.v3.json"          # v2: with sass_instructions; v3: with loop_loads
    if cached.exists():
        try:
            return json.loads(cached.read_text())
        except json.JSONDecodeError:
            pass
    with tempfile.TemporaryDirectory() as tmp:
        text = cubin_sass(cubin, tmp)
        usage = {k: int(v) for k, v in re.findall(r"\b(REG|STACK|SHARED|LOCAL):(\d+)", text)}
        facts = {"usage": usage, "sass_mma": sorted(set(SASS_MMA.findall(text))),
                 "local_ops": len(SASS_LOCAL.findall(text)), "spill_stores": 0, "spill_loads": 0,
                 "sass_instructions": len(SASS_INSTRUCTION.findall(text)),
                 "loop_loads": sass_loops.summary(sass_loops.loop_loads(text))}
        if usage.get("STACK", 0) or usage.get("LOCAL", 0):
            from triton.backends.nvidia.compiler import get_ptxas, sm_arch_from_capability
            ptx_path = os.path.join(tmp, "k.ptx")
            with open(ptx_path, "w") as f:
                f.write(ptx)
            log = _run_tool([get_ptxas(arch).path, "-v", f"--gpu-name={sm_arch_from_capability(arch)}", ptx_path,
                             "-o", os.path.join(tmp, "k2.cubin")])
            facts["spill_stores"] = sum(int(x) for x in re.findall(r"(\d+) bytes spill stores", log))
            facts["spill_loads"] = sum(int(x) for x in re.findall(r"(\d+) bytes spill loads", log))
    cached.write_text(json.dumps(facts))
    return facts


def compile_launch(launch: Launch, arch: int) -> KernelReport:
    import triton
    report = KernelReport(kernel=launch.name, grid=[], constexprs={},
                          num_warps=int(launch.kwargs.get("num_warps", 4)),
                          num_stages=int(launch.kwargs.get("num_stages", 3)))
    try:
        src, target, options, report.grid, report.constexprs = _bind(launch, arch)
        ck = triton.compile(src, target=target, options=options.__dict__)
    except InspectorError:
        raise
    except Exception as e:  # noqa: BLE001 - a config that does not compile is a result, not a crash
        lines = str(e).strip().splitlines()     # a CompilationError: "at L:C:", the source, then the error itself
        what = lines[0] + (f" {lines[-1].strip()}" if len(lines) > 1 else "") if lines else ""
        report.error = f"{type(e).__name__}: {what}"[:500]
        return report
    report.constexprs = {k: (v if isinstance(v, (int, float, bool, str)) or v is None else str(v))
                         for k, v in report.constexprs.items()}
    report.shared_bytes = int(ck.metadata.shared)
    facts = binary_facts(ck.asm["cubin"], ck.asm["ptx"], arch)
    usage = facts["usage"]
    report.registers = usage.get("REG", 0)
    report.stack_bytes = usage.get("STACK", 0)
    report.local_bytes = usage.get("LOCAL", 0)
    report.shared_bytes = max(report.shared_bytes, usage.get("SHARED", 0))
    report.local_ops = facts["local_ops"]
    report.spill_bytes = facts["spill_stores"] + facts["spill_loads"]
    report.ptx_mma = sorted(set(PTX_MMA.findall(ck.asm["ptx"])))
    report.sass_mma = facts["sass_mma"]
    report.sass_instructions = facts["sass_instructions"]
    report.loop_loads = facts["loop_loads"]
    ptx = ck.asm["ptx"]
    if "griddepcontrol.wait" in ptx:
        report.pdl = ("prefetch+" if "cp.async.bulk.prefetch.L2" in ptx else "") + "wait"
    return report



def inspect_impl(spec: registry.OpSpec, impl: registry.Impl, params: dict, config: dict | None,
                 target: str = "sm_120", cache: dict | None = None) -> ImplReport:
    """Capture, compile and read every kernel one call of `impl` launches at `params`."""
    arch = TARGETS[target]
    rep = ImplReport(op=spec.name, impl=impl.name, target=target, params=dict(params), config=dict(config or {}))
    try:
        launches = capture_impl(impl, spec, params, config, TARGET_SMS.get(target))
    except Exception as e:  # noqa: BLE001 - reported, and fatal for the sm_120 test
        rep.error = f"capture failed: {type(e).__name__}: {e}"[:500]
        return rep
    for launch in launches:
        key = _launch_key(launch, arch)
        if cache is not None and key in cache:     # the same binary; the grid is this launch's own
            rep.kernels.append(replace(cache[key], grid=_launch_grid(launch, arch)))
            continue
        kr = compile_launch(launch, arch)
        if cache is not None:
            cache[key] = kr
        rep.kernels.append(kr)
    return rep


def _launch_grid(launch: Launch, arch: int) -> list:
    """A launch's grid (a callable grid is evaluated on the bound arguments, as for compiling)."""
    return _bind(launch, arch)[3] if callable(launch.grid) else list(launch.grid)


def _launch_key(launch: Launch, arch: int) -> str:
    """Equal keys compile to the same binary: runtime ints by Triton's specialisation (0, 1,
    divisible by 16, 64-bit), tensors by dtype and 16-byte alignment, constexprs by value."""
    params = getattr(launch.fn, "params", [])
    const = {p.name for p in params if getattr(p, "is_constexpr", False)}

    def sig(name, a):
        if name in const:
            return repr(a)
        if isinstance(a, torch.Tensor):
            return f"T{a.dtype}:{a.data_ptr() % 16 == 0}"
        if isinstance(a, int) and not isinstance(a, bool):
            return f"i{a if a in (0, 1) else ('d16' if a % 16 == 0 else 'n')}:{a.bit_length() > 31}"
        return repr(a)
    names = [p.name for p in params] or [str(i) for i in range(len(launch.args))]
    text = json.dumps([launch.name, arch, [sig(n, a) for n, a in zip(names, launch.args)],
                       {k: repr(v) for k, v in sorted(launch.kwargs.items())}])
    return hashlib.sha1(text.encode()).hexdigest()


# --- many implementations -----------------------------------------------------------------------

def triton_impls(op_names: list[str] | None = None) -> list[tuple[registry.OpSpec, registry.Impl]]:
    out = []
    for spec in registry.ops(op_names):
        for impl in sorted(registry.impls(spec.name).values(), key=lambda i: i.name):
            if impl.backend == "triton":
                out.append((spec, impl))
    return out


def configs_for(impl: registry.Impl, params: dict, all_configs: bool) -> list[dict | None]:
    if all_configs and impl.configs is not None:
        return list(impl.configs(params))
    return [impl.default_config(params) if impl.default_config else None]


def inspect_impls(op_names: list[str] | None = None, *, shape_set: str = "flash-tp8", target: str = "sm_120",
                  all_configs: bool = False, modules: tuple[str, ...] = (), batches: tuple[int, ...] | None = None,
                  impl_names: tuple[str, ...] = (), tensor_core_ops: tuple[str, ...] = TENSOR_CORE_OPS,
                  progress: bool = False, select=None) -> list[dict]:
    """Inspect every Triton implementation of `op_names` (all ops when None) at every case of the
    shape set: the default config, or every config of its space. `select(op, impl) -> bool` keeps only
    some (op, implementation) pairs. Returns ImplReport dicts with a `problems` list and a `label`. An
    unknown op or implementation name raises InspectorError."""
    for m in modules:
        registry.load_module(m)
    try:
        pairs = triton_impls(op_names)
    except LookupError as e:
        raise InspectorError(str(e).strip("'\"")) from None
    unknown = sorted(set(impl_names) - {impl.name for _, impl in pairs})
    if unknown:
        raise InspectorError(f"no Triton implementation named {', '.join(unknown)} among the selected ops "
                             f"(they have: {', '.join(sorted({i.name for _, i in pairs})) or 'none'})")
    jobs = []
    for spec, impl in pairs:
        if (impl_names and impl.name not in impl_names) or (select and not select(spec.name, impl.name)):
            continue
        for params in spec.shape_cases(shape_set):
            if batches and spec.batch(params) not in (None, *batches):
                continue
            for cfg in configs_for(impl, params, all_configs):
                jobs.append((spec.name, impl.name, params, cfg))
    return inspect_jobs(jobs, target=target, modules=modules, tensor_core_ops=tensor_core_ops, progress=progress)


MAX_WORKERS = 16


def inspect_workers(n_jobs: int) -> int:
    """How many processes compile `n_jobs` jobs side by side: KERNELBENCH_INSPECT_WORKERS, else default_workers(),
    never more than the jobs. Compiling is CPU-bound and single-threaded per kernel: on the
    16-core GPU machine `kernelbench tune`'s sm_120 pre-check of 16 candidates ran past a 25 s limit one at a time
    (session 40, call 1). A value that is not a positive integer is a kernelbench.usage.UsageProblem."""
    from kernelbench.usage import INSPECT_WORKERS_ENV, env_positive_int
    n = env_positive_int(INSPECT_WORKERS_ENV) or default_workers()
    return max(1, min(n, n_jobs))


def default_workers() -> int:
    """The CPU count (at most MAX_WORKERS) shared among the processes already running side by side: pytest-xdist's
    workers (PYTEST_XDIST_WORKER_COUNT) each get their share, so the test suite's compile checks do not oversubscribe
    the cores."""
    try:
        siblings = max(1, int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")))
    except ValueError:
        siblings = 1
    return max(1, min(MAX_WORKERS, (os.cpu_count() or 1) // siblings))


def inspect_jobs(jobs: list[tuple], *, target: str = "sm_120", modules: tuple[str, ...] = (),
                 tensor_core_ops: tuple[str, ...] = TENSOR_CORE_OPS, progress: bool = False,
                 on_done=None, workers: int | None = None) -> list[dict]:
    """Inspect (op, impl, params, config[, fn_ref]) jobs, in job order. With more than one worker
    (`inspect_workers`) contiguous slices of the jobs compile in subprocesses side by side; under the interpreter
    the work always runs in subprocesses with it off (the compiler needs real JITFunctions). `progress`: a bar (or
    log lines) on stderr."""
    n = inspect_workers(len(jobs)) if workers is None else max(1, min(workers, len(jobs)))
    if os.environ.get("TRITON_INTERPRET", "0") == "1" or n > 1:
        return _inspect_subprocess(jobs, target, modules, tensor_core_ops, progress, n, on_done)
    from kernelbench.progress import steps
    for m in modules:
        registry.load_module(m)
    limit = SMEM_LIMIT[TARGETS[target]]
    cache: dict = {}
    out = []
    with steps(f"inspect ({target})", len(jobs), progress) as advance:
        for op, impl_name, params, cfg, *fn_ref in jobs:
            spec, impl = registry.get_op(op), find_impl(op, impl_name, fn_ref[0] if fn_ref else None)
            rep = inspect_impl(spec, impl, params, cfg, target, cache)
            d = rep.as_dict()
            simt = impl.simt(cfg or {}, params) if impl.simt is not None else None
            d["problems"] = rep.problems(limit, op in tensor_core_ops and not simt)
            if simt:
                d["simt"] = simt
            d["label"] = spec.label(params)
            out.append(d)
            label = f"{op}/{impl_name} {d['label']}"
            advance(label)
            if on_done:
                on_done(label)
    return out


_DONE = "kernelbench-inspect-done "


def fn_ref(impl: registry.Impl) -> str:
    return f"{impl.fn.__module__}:{impl.fn.__qualname__}"


def find_impl(op: str, name: str, ref: str | None) -> registry.Impl:
    """The impl by name; else (an impl registered only in the parent process) one with the same
    wrapper function, which is all that compiling needs."""
    found = registry.impls(op)
    if name in found or ref is None:
        return registry.get_impl(op, name)
    for impl in found.values():
        if fn_ref(impl) == ref:
            return impl
    return registry.get_impl(op, name)


def _user_module_files(jobs) -> list[str]:
    """Files of modules loaded by path (registry.load_module) that define the jobs' impls or ops:
    the subprocess must load them too."""
    files = []
    for op, impl_name, *_ in jobs:
        for obj in (registry.get_op(op).reference, find_impl(op, impl_name, None).fn):
            mod = sys.modules.get(getattr(obj, "__module__", ""))
            path = getattr(mod, "__file__", None)
            if mod is not None and mod.__name__.startswith("kernelbench_user_") and path and path not in files:
                files.append(path)
    return files


def _slices(n_items: int, parts: int) -> list[range]:
    """`parts` contiguous ranges covering 0 .. n_items - 1, sizes differing by at most one (none empty)."""
    parts = max(1, min(parts, n_items))
    q, r = divmod(n_items, parts)                       # the first r slices one longer
    return [range(i * q + min(i, r), (i + 1) * q + min(i + 1, r)) for i in range(parts)]


def _inspect_subprocess(jobs, target, modules, tensor_core_ops, progress: bool = False,
                        workers: int = 1, on_done=None) -> list[dict]:
    """The jobs in `workers` subprocesses (interpreter off, each compiling one contiguous slice in order, one
    worker apiece so none fans out again); their reports concatenated in job order; `on_done(label)` after each job
    as it finishes. A failed subprocess is an InspectorError with its stderr's tail."""
    import threading
    from kernelbench.progress import steps
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    modules = list(modules) + [f for f in _user_module_files(jobs) if f not in modules]
    slices = _slices(len(jobs), workers)
    lock = threading.Lock()
    with tempfile.TemporaryDirectory() as tmp, steps(f"inspect ({target})", len(jobs), progress) as advance:
        procs = []
        for i, rng in enumerate(slices):
            req, out, err = (os.path.join(tmp, f"{n}{i}") for n in ("request.json.", "out.json.", "stderr.txt."))
            with open(req, "w") as f:
                json.dump({"jobs": [jobs[j] for j in rng], "target": target, "modules": list(modules),
                           "tensor_core_ops": list(tensor_core_ops)}, f)
            cmd = [sys.executable, "-m", "kernelbench.harness.inspector", req, out]
            errf = open(err, "w")
            procs.append((subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=errf, text=True), errf,
                          out, err))

        def follow(proc):                     # one line per finished job: the progress
            for line in proc.stdout:
                if line.startswith(_DONE):
                    with lock:
                        label = line[len(_DONE):].strip()
                        advance(label)
                        if on_done:
                            on_done(label)

        readers = [threading.Thread(target=follow, args=(p,), daemon=True) for p, *_ in procs]
        for t in readers:
            t.start()
        failed = []
        try:
            for (proc, errf, _, err), t in zip(procs, readers):
                rc = proc.wait(timeout=3600)
                t.join()
                if rc != 0:
                    with open(err) as f:
                        failed.append(f"inspector subprocess failed ({rc}):\n{f.read()[-4000:]}")
        finally:                              # a hang or an interrupt leaves no compiling process behind
            for proc, errf, _, _ in procs:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
                errf.close()
        if failed:
            raise InspectorError("\n".join(failed))
        reports = []
        for _, _, out, _ in procs:
            with open(out) as f:
                reports += json.load(f)
        return reports


def main(argv: list[str] | None = None) -> int:
    """python -m kernelbench.harness.inspector REQUEST.json OUT.json (the interpreter-free subprocess)."""
    req_path, out_path = (argv or sys.argv[1:])[:2]
    with open(req_path) as f:
        req = json.load(f)
    reports = inspect_jobs([tuple(j) for j in req["jobs"]], target=req["target"], modules=tuple(req["modules"]),
                           tensor_core_ops=tuple(req["tensor_core_ops"]),
                           on_done=lambda label: print(_DONE + label, flush=True), workers=1)
    with open(out_path, "w") as f:
        json.dump(reports, f, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main())
