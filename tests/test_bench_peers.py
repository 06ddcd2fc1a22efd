"""scripts/cublas_peer.py (the cuBLAS comparison `kernelbench bench fp8_linear --module scripts/cublas_peer.py`
times, issue 14 item 5): its prepared operands give the reference's result within fp8_linear's tolerance, so
the bench's recheck of its timed outputs passes; a peer that dropped the activation quantization fails here."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from kernelbench import registry
from kernelbench.harness.testing import error_stats, passes

PEER = str(Path(__file__).parents[1] / "scripts" / "cublas_peer.py")


@pytest.fixture
def peer():
    registry.load_builtin()
    registry.load_module(PEER)
    yield registry.get_impl("fp8_linear", "torch_bf16")
    registry.unregister_impl("fp8_linear", "torch_bf16")


@pytest.mark.parametrize("values", ["normal", "outliers", "boundary"])
def test_cublas_peer_matches_the_reference(peer, values):
    spec = registry.get_op("fp8_linear")
    p = {"M": 5, "N": 256, "K": 512}
    inputs = spec.make_inputs(p, torch.Generator().manual_seed(3), "cpu", values)
    out = peer.fn(**peer.prepared(inputs))
    tol = spec.tolerance(p)["y"]
    assert out.dtype == torch.bfloat16 and out.shape == (5, 256)
    assert passes(error_stats(out, spec.reference(**inputs), tol), tol)
    raw = torch.nn.functional.linear(inputs["x"], peer.prepared(inputs)["weight"])   # activations not quantized
    assert not passes(error_stats(raw, spec.reference(**inputs), tol), tol)
