"""The Triton interpreter multiplies the raw bits of bfloat16 operands in tl.dot (upstream triton
issue 11584). Kernels work around it with kernels.common.dot_operand (fp32 operands under the
interpreter only). These tests keep both facts honest:
- while the defect exists, a plain bf16 dot in the interpreter is wrong (when upstream fixes it this
  test fails, and the workaround should be removed);
- the workaround gives the right product in the interpreter, and on a GPU the plain bf16 path does.
"""
import pytest
import torch
import triton
import triton.language as tl

from kernelbench.kernels.common import INTERPRET, dot_operand, to_bf16


@triton.jit
def _dot_kernel(a_ptr, b_ptr, c_ptr, N: tl.constexpr, DOT_UPCAST: tl.constexpr):
    r = tl.arange(0, N)
    a = tl.load(a_ptr + r[:, None] * N + r[None, :])
    b = tl.load(b_ptr + r[:, None] * N + r[None, :])
    c = tl.dot(dot_operand(a, DOT_UPCAST), dot_operand(b, DOT_UPCAST))
    tl.store(c_ptr + r[:, None] * N + r[None, :], c)


def _run(upcast: bool, device: str):
    g = torch.Generator().manual_seed(0)
    a = torch.randn(16, 16, generator=g).bfloat16().to(device)
    b = torch.randn(16, 16, generator=g).bfloat16().to(device)
    c = torch.full((16, 16), float("nan"), device=device)
    _dot_kernel[(1,)](a, b, c, N=16, DOT_UPCAST=upcast)
    ref = a.double() @ b.double()
    return ((c.double() - ref).norm() / ref.norm()).item()


@pytest.mark.skipif(not INTERPRET, reason="checks the Triton interpreter (TRITON_INTERPRET=1)")
def test_interpreter_bf16_dot_is_still_wrong():
    assert _run(upcast=False, device="cpu") > 1.0, "upstream fixed bf16 tl.dot in the interpreter: drop DOT_UPCAST"


@pytest.mark.skipif(not INTERPRET, reason="checks the Triton interpreter (TRITON_INTERPRET=1)")
def test_interpreter_workaround_is_right():
    assert _run(upcast=True, device="cpu") < 1e-6


@pytest.mark.gpu
@pytest.mark.skipif(INTERPRET, reason="compiled kernels only")
def test_gpu_bf16_dot_is_right():
    # bf16 operands, fp32 accumulation: error ~ bf16 rounding of the inputs is already in ref (it uses
    # the same bf16 values), so only fp32 accumulation error remains.
    assert _run(upcast=False, device="cuda") < 1e-5


@triton.jit
def _cast_kernel(x_ptr, plain_ptr, fixed_ptr, N: tl.constexpr, RNE_FIX: tl.constexpr):
    r = tl.arange(0, N)
    x = tl.load(x_ptr + r)
    tl.store(plain_ptr + r, x.to(tl.bfloat16))
    tl.store(fixed_ptr + r, to_bf16(x, RNE_FIX))


def _casts(device: str, fix: bool):
    # 1 + 2^-8 + 2^-12 lies above the midpoint between bf16 neighbours 1 and 1 + 2^-7: RNE gives 1 + 2^-7
    x = torch.tensor([1 + 2**-8 + 2**-12, -(1 + 2**-8 + 2**-12), 3.0, 0.0, -0.0, 1e-40, float("inf"), 2**-9 + 1],
                     dtype=torch.float32, device=device)
    plain = torch.empty(8, dtype=torch.bfloat16, device=device)
    fixed = torch.empty(8, dtype=torch.bfloat16, device=device)
    _cast_kernel[(1,)](x, plain, fixed, N=8, RNE_FIX=fix)
    return x.to(torch.bfloat16), plain, fixed   # torch's cast is RNE


@pytest.mark.skipif(not INTERPRET, reason="checks the Triton interpreter (TRITON_INTERPRET=1)")
def test_interpreter_bf16_cast_still_truncates_and_to_bf16_rounds():
    rne, plain, fixed = _casts("cpu", fix=True)
    assert not torch.equal(plain.view(torch.int16), rne.view(torch.int16)), \
        "upstream made the interpreter's fp32->bf16 cast round to nearest: drop to_bf16's RNE_FIX path"
    assert torch.equal(fixed.view(torch.int16), rne.view(torch.int16))


@pytest.mark.gpu
@pytest.mark.skipif(INTERPRET, reason="compiled kernels only")
def test_gpu_bf16_cast_rounds_to_nearest():
    rne, plain, fixed = _casts("cuda", fix=False)
    assert torch.equal(plain.view(torch.int16), rne.view(torch.int16))
    assert torch.equal(fixed.view(torch.int16), rne.view(torch.int16))


@triton.jit
def _scalar_mask_kernel(ids_ptr, out_ptr, VL, B: tl.constexpr):
    d = tl.arange(0, B)
    local = tl.load(ids_ptr).to(tl.int64)
    first = tl.program_id(0) == 0
    tl.store(out_ptr + d, d + 1, mask=(d < 8) & (local < VL) & first)


def test_block_and_scalar_comparison_mask():
    """`block & scalar-comparison` masks: Triton 3.9's interpreter refuses them unless comparison
    results are int1 (kernels.common.fix_interpreter_compares); compiled code always accepts them."""
    device = "cpu" if INTERPRET else "cuda"
    if device == "cuda" and not torch.cuda.is_available():
        pytest.skip("needs TRITON_INTERPRET=1 or a CUDA GPU")
    out = torch.zeros(16, dtype=torch.int32, device=device)
    _scalar_mask_kernel[(2,)](torch.tensor([1], device=device), out, 5, B=16)
    assert out.tolist() == list(range(1, 9)) + [0] * 8
