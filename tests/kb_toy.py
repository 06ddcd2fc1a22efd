"""A toy op with a Triton kernel, for the measurement tests (inspect, tune, sm_120) while the real
kernels land and to drive paths no real kernel should take (a config that crashes, hangs, computes
the wrong thing or outgrows shared memory). Loaded by path: registry.load_module(__file__).

toy_mm: y[M,N] fp32 = x[M,K] fp32 @ w[N,K]^T (fp32 dot: correct in the interpreter).
Config knobs: BLOCK_N, BLOCK_K, num_warps, num_stages, plus test-only switches:
    skip_last_k  -> drops the last K block (fails verification)
    crash        -> the process aborts (isolated by the tuner)
    hang         -> the process sleeps forever (timed out by the tuner)
"""
from __future__ import annotations

import os
import time

import torch
import triton
import triton.language as tl
from hypothesis import strategies as st

from kernelbench.tuned_configs import lookup
from kernelbench.registry import Cost, OpSpec, Tolerance, register_impl, register_op, _OPS

OP = "toy_mm"


def reference(x, w):
    return (x.double() @ w.double().T).float()


def cases(ss):
    return [{"M": m, "N": 64, "K": 128} for m in (1, 16)]


def make_inputs(p, gen, device, values):
    x = torch.randn((p["M"], p["K"]), generator=gen) + 0.5
    w = torch.randn((p["N"], p["K"]), generator=gen) + 0.5
    return {"x": x.to(device), "w": w.to(device)}


if OP not in _OPS:
    register_op(OpSpec(
        name=OP, family="toy", reference=reference, make_inputs=make_inputs, cases=cases, batch_key="M",
        strategy=lambda: st.just({"M": 2, "N": 64, "K": 128}),
        cost=lambda p: Cost(flops=2.0 * p["M"] * p["N"] * p["K"], bytes=4.0 * (p["M"] * p["K"] + p["N"] * p["K"] + p["M"] * p["N"])),
        tolerance=lambda p: {"y": Tolerance(rtol=1e-2, atol=1e-2, rel_fro=2e-3,
                                            why="fp32 tl.dot runs as tf32 on GPUs (10-bit mantissa inputs): "
                                                "~2^-11 relative per product; measured rel_fro 7e-4 on the H200")},
        outputs=("y",)))


@triton.jit
def toy_mm_kernel(x_ptr, w_ptr, y_ptr, M, N, K,                 # x (M, K) fp32, w (N, K) fp32, y (M, N) fp32
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, SKIP_LAST: tl.constexpr):
    pid_n = tl.program_id(0)
    rm = tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), tl.float32)
    k_end = K - BLOCK_K if SKIP_LAST else K
    for k0 in range(0, k_end, BLOCK_K):
        x = tl.load(x_ptr + rm[:, None] * K + (k0 + rk)[None, :], mask=(rm[:, None] < M), other=0.0)
        w = tl.load(w_ptr + rn[None, :] * K + (k0 + rk)[:, None], mask=(rn[None, :] < N), other=0.0)
        acc += tl.dot(x, w)
    tl.store(y_ptr + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


def configs(p):
    return [{"BLOCK_N": bn, "BLOCK_K": bk, "num_warps": 4, "num_stages": 2} for bn in (16, 32) for bk in (32, 64)]


def default_config(p):
    return {"BLOCK_N": 32, "BLOCK_K": 32, "num_warps": 4, "num_stages": 2}


@register_impl(OP, "triton", backend="triton", configs=configs, default_config=default_config, replace=True)
def toy_mm(x, w, config=None):
    cfg = config or lookup(OP, {"M": x.shape[0], "N": w.shape[0], "K": x.shape[1]}, default_config({}))
    if cfg.get("crash"):
        os.abort()
    if cfg.get("hang"):
        time.sleep(3600)
    M, K = x.shape
    N = w.shape[0]
    y = torch.empty((M, N), dtype=torch.float32, device=x.device)
    block_m = max(16, triton.next_power_of_2(M))
    grid = (triton.cdiv(N, cfg["BLOCK_N"]),)
    toy_mm_kernel[grid](x, w, y, M, N, K, BLOCK_M=block_m, BLOCK_N=cfg["BLOCK_N"], BLOCK_K=cfg["BLOCK_K"],
                        SKIP_LAST=bool(cfg.get("skip_last_k", False)),
                        num_warps=cfg["num_warps"], num_stages=cfg["num_stages"])
    return y


def fake_timer(calls, config):
    """A deterministic stand-in for the GPU timer: larger blocks are 'faster'. Returns samples in us."""
    calls[0]()
    base = 100.0 / (config["BLOCK_N"] * config["BLOCK_K"]) * 64
    return [base * (1 + 0.01 * i) for i in range(5)]


@triton.jit
def toy_mm_simt_kernel(x_ptr, w_ptr, y_ptr, M, N, K,
                       BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """The same product on CUDA cores (broadcast multiply + sum): what the inspector must flag."""
    pid_n = tl.program_id(0)
    rm = tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), tl.float32)
    for k0 in range(0, K, BLOCK_K):
        x = tl.load(x_ptr + rm[:, None] * K + (k0 + rk)[None, :], mask=(rm[:, None] < M), other=0.0)
        w = tl.load(w_ptr + rn[:, None] * K + (k0 + rk)[None, :], mask=(rn[:, None] < N), other=0.0)
        acc += tl.sum(x[:, None, :] * w[None, :, :], axis=2)
    tl.store(y_ptr + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


@register_impl(OP, "simt", backend="triton", configs=configs, default_config=default_config, replace=True)
def toy_mm_simt(x, w, config=None):
    cfg = config or default_config({})
    M, K = x.shape
    N = w.shape[0]
    y = torch.empty((M, N), dtype=torch.float32, device=x.device)
    toy_mm_simt_kernel[(triton.cdiv(N, cfg["BLOCK_N"]),)](x, w, y, M, N, K, BLOCK_M=max(16, triton.next_power_of_2(M)),
                                                         BLOCK_N=cfg["BLOCK_N"], BLOCK_K=cfg["BLOCK_K"],
                                                         num_warps=cfg["num_warps"], num_stages=cfg["num_stages"])
    return y


@register_impl(OP, "torch_only", backend="triton", replace=True)
def toy_mm_no_kernel(x, w, config=None):
    """Claims the Triton backend but launches no kernel: the inspector must not pass it silently."""
    return (x @ w.T).float()
