"""The compute precision of the reference ops.

Reference ops do their arithmetic in `acc(x)`: float32 by default, as the SPEC says. Verification
runs them under `compute_dtype(torch.float64)` so the reference is (close to) the exact function and
the kernel's own rounding is what the comparison measures. Storage casts the SPEC names (bf16 outputs,
e4m3 codes) are part of an op's contract and stay in both modes.
"""
from __future__ import annotations

import contextlib
import threading

import torch

_state = threading.local()


def current() -> torch.dtype:
    return getattr(_state, "dtype", torch.float32)


@contextlib.contextmanager
def compute_dtype(dtype: torch.dtype):
    if dtype not in (torch.float32, torch.float64):
        raise ValueError(f"reference compute dtype must be float32 or float64, got {dtype}")
    old = current()
    _state.dtype = dtype
    try:
        yield
    finally:
        _state.dtype = old


def acc(x: torch.Tensor) -> torch.Tensor:
    """Upcast to the reference compute dtype (float32 unless verification asked for float64)."""
    return x.to(current())
