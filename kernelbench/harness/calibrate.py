"""Measure this GPU's ceilings and store them with the device fingerprint (db table calibration).

Measures (each a `timing.Summary` of raw samples; value = the median's rate):
    copy_gbps     device-to-device copy of 1 GiB, counting bytes read + written (CUDA events)
    l2_gbps       copy of a buffer a quarter of L2 in size, 64 copies per CUDA graph replay: the
                  data stays in L2, so this is the L2 ceiling seen by a streaming kernel (approximate:
                  the first touch of each replay is not excluded)
    bf16_tflops   torch.matmul 8192^3 bf16 on random data (cuBLAS)
    fp8_tflops    torch._scaled_mm 8192^3 e4m3 with tensorwise scales, bf16 out (cuBLASLt)
Random data throughout: a product on zeros runs faster than on real data (METHOD.md).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from kernelbench.harness import timing


@dataclass
class Ceiling:
    measure: str
    value: float
    unit: str
    summary: timing.Summary
    method: str


def copy_bandwidth(nbytes: int = 2 ** 30, max_time_s: float = 1.0) -> Ceiling:
    dev = timing.require_cuda()
    src = torch.randint(-2 ** 31, 2 ** 31 - 1, (nbytes // 4,), dtype=torch.int32, device=dev)
    dst = torch.empty_like(src)
    s = timing.time_events([lambda: dst.copy_(src)], flush=False, max_time_s=max_time_s, target_rse=0.005)
    return Ceiling("copy_gbps", 2 * nbytes / s.median_us / 1e3, "GB/s", s,
                   f"dst.copy_(src), {nbytes} bytes int32 random, bytes read + written, CUDA events, median")


def l2_bandwidth(max_time_s: float = 1.0) -> Ceiling:
    dev = timing.require_cuda()
    nbytes = timing.l2_bytes(dev) // 4
    src = torch.randint(-2 ** 31, 2 ** 31 - 1, (nbytes // 4,), dtype=torch.int32, device=dev)
    dst = torch.empty_like(src)
    s, _, launches = timing.time_graph([lambda: dst.copy_(src)], launches=64, max_time_s=max_time_s)
    return Ceiling("l2_gbps", 2 * nbytes / s.median_us / 1e3, "GB/s", s,
                   f"copy of {nbytes} bytes (L2/4) x {launches} per CUDA graph replay, bytes read + written")


def bf16_matmul(n: int = 8192, max_time_s: float = 1.5) -> Ceiling:
    dev = timing.require_cuda()
    g = torch.Generator(device=dev).manual_seed(0)
    a = torch.randn(n, n, device=dev, dtype=torch.bfloat16, generator=g)
    b = torch.randn(n, n, device=dev, dtype=torch.bfloat16, generator=g)
    out = torch.empty(n, n, device=dev, dtype=torch.bfloat16)
    torch.matmul(a, b, out=out)
    s = timing.time_events([lambda: torch.matmul(a, b, out=out)], flush=False, max_time_s=max_time_s,
                           target_rse=0.005)
    return Ceiling("bf16_tflops", 2 * n ** 3 / s.median_us / 1e6, "TFLOP/s", s,
                   f"torch.matmul {n}^3 bf16 random normal, CUDA events, median")


def fp8_matmul(n: int = 8192, max_time_s: float = 1.5) -> Ceiling:
    dev = timing.require_cuda()
    g = torch.Generator(device=dev).manual_seed(1)
    a = torch.randn(n, n, device=dev, generator=g).to(torch.float8_e4m3fn)
    b = torch.randn(n, n, device=dev, generator=g).to(torch.float8_e4m3fn).t()   # column-major, as cuBLASLt needs
    one = torch.ones((), device=dev, dtype=torch.float32)
    call = lambda: torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)  # noqa: E731
    call()
    s = timing.time_events([call], flush=False, max_time_s=max_time_s, target_rse=0.005)
    return Ceiling("fp8_tflops", 2 * n ** 3 / s.median_us / 1e6, "TFLOP/s", s,
                   f"torch._scaled_mm {n}^3 e4m3 tensorwise scales, bf16 out, random normal, CUDA events, median")


MEASURES = {"copy_gbps": copy_bandwidth, "l2_gbps": l2_bandwidth, "bf16_tflops": bf16_matmul,
            "fp8_tflops": fp8_matmul}


def calibrate(measures: list[str] | None = None, log=print) -> list[Ceiling]:
    out = []
    for name in measures or list(MEASURES):
        try:
            c = MEASURES[name]()
        except timing.NoGPUError:
            raise
        except Exception as e:  # noqa: BLE001 - e.g. no fp8 matmul on this GPU: say so, go on
            log(f"{name}: not measured ({type(e).__name__}: {e})")
            continue
        log(f"{name}: {c.value:.1f} {c.unit} (median of {c.summary.n}, IQR {c.summary.iqr_us:.1f} us)")
        out.append(c)
    return out


def store_ceilings(store, env_id: int, ceilings: list[Ceiling], git_commit: str = "") -> None:
    store.add_calibrations(dict(environment_id=env_id, measure=c.measure, value=c.value, unit=c.unit,
                                samples=c.summary.samples, method=c.method, git_commit=git_commit)
                           for c in ceilings)


def load_ceilings(store, env_id: int | None = None, gpu_name: str | None = None) -> dict[str, float]:
    """The newest value of each measure for an environment (or any environment of a GPU name)."""
    return store.newest_calibrations(env_id, gpu_name)
