"""Helpers the per-family kernel tests share: the Triton skip marker, one verify example (the engine's
own check: poisoned allocations, fp64 reference, untouched inputs, strided layouts), a hypothesis
sweep of an op's strategy through it, and the sm_120 fit of an impl's configs."""
from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from kernelbench import registry
from kernelbench.kernels.common import INTERPRET
from kernelbench.harness.verify_check import LAYOUTS, Example, check_example

needs_triton = pytest.mark.skipif(not (INTERPRET or torch.cuda.is_available()),
                                  reason="Triton kernels need TRITON_INTERPRET=1 on a CPU")
# Where the Triton kernels run: the interpreter takes CPU tensors, compiled kernels (a GPU with
# TRITON_INTERPRET unset) refuse them ("Triton kernels need a CUDA device").
KERNEL_DEVICE = "cpu" if INTERPRET or not torch.cuda.is_available() else "cuda"


def run_impl(op: str, impl: str, **inputs):
    """registry impl `impl` of `op` on `inputs` (CPU tensors, as the tests build them): a Triton impl
    runs on KERNEL_DEVICE, the reference on the CPU (its CPU arithmetic is the contract); the outputs
    come back on the CPU, so tests compare them with CPU-built expectations on any machine."""
    im = registry.get_impl(op, impl)
    dev = KERNEL_DEVICE if im.backend == "triton" else "cpu"
    out = im.fn(**{k: v.to(dev) if isinstance(v, torch.Tensor) else v for k, v in inputs.items()})
    if isinstance(out, tuple):
        return tuple(o.cpu() if isinstance(o, torch.Tensor) else o for o in out)
    return out.cpu()


def verify(op, params, values, seed, layout):
    ex = Example(op, "triton", params, values, seed, layout)
    res = check_example(registry.get_op(op), registry.get_impl(op, "triton"), ex, device=KERNEL_DEVICE)
    assert res.passed, f"{ex.repro()}\n{res.failure}"


def verify_drawn(op):
    """The op's Triton kernel against its reference on hypothesis-drawn params, values, seeds, layouts."""
    spec = registry.get_op(op)

    @given(params=spec.strategy(), values=st.sampled_from(spec.value_modes), seed=st.integers(0, 2 ** 16),
           layout=st.sampled_from(LAYOUTS))
    def run(params, values, seed, layout):
        verify(op, params, values, seed, layout)
    run()


SM120_SHARED = 101_376      # bytes of shared memory a block may take on sm_120


def fits_sm120(op: str, impl: str, params: dict, configs, kernel: str) -> list[dict]:
    """Compile `impl` of `op` at `params` for sm_120 with each config (None: its default) and assert that each
    builds without a problem, and that its kernel whose name ends with `kernel` fits sm_120's shared memory without
    spills, at least one program an SM. -> those kernel reports."""
    from kernelbench.harness import inspector
    found = []
    for rep in inspector.inspect_jobs([(op, impl, params, cfg) for cfg in configs], target="sm_120"):
        assert not rep["error"] and not rep["problems"], (rep["error"], rep["problems"])
        (k,) = [k for k in rep["kernels"] if k["kernel"].endswith(kernel)]
        assert k["shared_bytes"] <= SM120_SHARED and not k["spills"] and k["programs_per_sm"] >= 1, k
        found.append(k)
    return found
