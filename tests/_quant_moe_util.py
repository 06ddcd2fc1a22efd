"""Helpers shared by tests/test_quant.py, test_linear.py, test_moe.py: the op spec and Triton impl of an
op (importing only this family's modules), poisoned output allocation, and a check against the reference."""
from __future__ import annotations

import importlib

import torch

from kernelbench import registry
from kernelbench.reference.precision import compute_dtype
from kernelbench.harness.testing import assert_close, poison_

_MODULES = ("kernelbench.ops.quant", "kernelbench.ops.linear", "kernelbench.ops.moe",
            "kernelbench.kernels.quant", "kernelbench.kernels.linear", "kernelbench.kernels.moe")


def spec_and_impl(op: str, impl: str = "triton"):
    for m in _MODULES:
        importlib.import_module(m)
    return registry._OPS[op], registry._IMPLS[op][impl]


def poisoned_empty(monkeypatch):
    """Make torch.empty / empty_like return poisoned buffers, so an output element a kernel never writes
    shows up as NaN / a sentinel instead of a lucky zero."""
    real_empty, real_like = torch.empty, torch.empty_like

    def empty(*a, **k):
        return poison_(real_empty(*a, **k))

    def empty_like(*a, **k):
        return poison_(real_like(*a, **k))

    monkeypatch.setattr(torch, "empty", empty)
    monkeypatch.setattr(torch, "empty_like", empty_like)


def as_tuple(x):
    return x if isinstance(x, tuple) else (x,)


def check_against_reference(op: str, params: dict, values: str = "normal", seed: int = 0, config=None,
                            fp64: bool = True, impl_name: str = "triton", prepare: bool = True):
    """The reference on the official inputs vs the implementation on its prepared layout (Impl.prepare, the
    transform included), or on the official inputs with prepare=False."""
    spec, impl = spec_and_impl(op, impl_name)
    inp = spec.make_inputs(params, torch.Generator().manual_seed(seed), "cpu", values)
    with compute_dtype(torch.float64 if fp64 else torch.float32):
        ref = as_tuple(spec.reference(**inp))
    run = impl.prepared(inp) if prepare else inp
    out = as_tuple(impl.fn(**run, config=config) if config else impl.fn(**run))
    tol = spec.tolerance(params)
    assert len(out) == len(spec.outputs)
    for name, o, r in zip(spec.outputs, out, ref):
        assert o.dtype == r.dtype and o.shape == r.shape, (name, o.dtype, r.dtype, o.shape, r.shape)
        assert_close(o, r, tol[name], f"{op}.{name} {params} {values}")
    return inp, out, ref
