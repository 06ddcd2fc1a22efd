"""What every kernel module shares: interpreter detection and the bf16-dot workaround.

The Triton interpreter (TRITON_INTERPRET=1, how CI runs kernels on a CPU) computes `tl.dot` on
bfloat16 operands wrongly: it multiplies the raw bits (upstream triton issue 11584). fp8 and fp32
operands are correct there. Kernels therefore pass `DOT_UPCAST=INTERPRET` and call `dot_operand`,
which upcasts bf16 operands to fp32 only under the interpreter; compiled GPU code keeps bf16
tensor-core MMAs. tests/test_interpreter_defect.py keeps watching the defect, so the workaround
is removed the day upstream fixes it, and GPU verification covers the real bf16 path.
"""
from __future__ import annotations

import os

import torch
import triton
import triton.language as tl

INTERPRET: bool = os.environ.get("TRITON_INTERPRET", "0") == "1"


@triton.jit
def dot_operand(x, DOT_UPCAST: tl.constexpr):
    if DOT_UPCAST:
        return x.to(tl.float32)
    return x


def check_device(*tensors: torch.Tensor) -> torch.device:
    """Kernels run on CUDA, or on the CPU through the interpreter; all operands on one device."""
    devs = {t.device for t in tensors if isinstance(t, torch.Tensor)}
    if len(devs) > 1:
        raise ValueError(f"operands are on different devices: {sorted(map(str, devs))}")
    dev = devs.pop() if devs else torch.device("cpu")
    if dev.type == "cpu" and not INTERPRET:
        raise RuntimeError("Triton kernels need a CUDA device; on a CPU set TRITON_INTERPRET=1 to run them "
                           "in the Triton interpreter")
    if dev.type not in ("cpu", "cuda"):
        raise RuntimeError(f"unsupported device {dev}")
    return dev


def check_dtype(name: str, t: torch.Tensor, *dtypes: torch.dtype) -> None:
    if t.dtype not in dtypes:
        raise TypeError(f"{name} must be {' or '.join(map(str, dtypes))}, got {t.dtype}")


def check_shape(name: str, t: torch.Tensor, shape: tuple) -> None:
    """shape entries may be None (any size)."""
    if t.dim() != len(shape) or any(s is not None and s != d for s, d in zip(shape, t.shape)):
        raise ValueError(f"{name} must have shape {tuple('*' if s is None else s for s in shape)}, "
                         f"got {tuple(t.shape)}")
