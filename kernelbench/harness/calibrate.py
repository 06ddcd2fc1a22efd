"""Measure this GPU's ceilings and store them with the device fingerprint (db table calibration).

Measures (each a `timing.Summary` of raw samples; value = the median's rate):
    copy_gbps     device-to-device copy of 1 GiB, counting bytes read + written (CUDA events)
    l2_gbps       copy of a buffer a quarter of L2 in size, 64 copies per CUDA graph replay: the
                  data stays in L2, so this is the L2 ceiling seen by a streaming kernel (approximate:
                  the first touch of each replay is not excluded)
    bf16_tflops   torch.matmul 8192^3 bf16 on random data (cuBLAS)
    fp8_tflops    torch._scaled_mm 8192^3 e4m3 with tensorwise scales, bf16 out (cuBLASLt)
    launch_us     a dependent launch of a one-wave grid that does (next to) nothing, 64 per CUDA graph replay: the
                  fixed cost every kernel of the decode step pays before its bytes (kernels/probe.py)
    launch_pdl_us the same launches with programmatic dependent launch (sm_90+), as the step's one-token kernels
    ticket_us     what one in-kernel ticket stage adds to such a launch: every program stores a partial and takes an
                  acq_rel ticket, the last sums the partials (the split-K tail of the fused decode kernels)
Random data throughout: a product on zeros runs faster than on real data (METHOD.md). The latency probes count what
they did and are checked after the timing (a graph that skipped a launch is an error, not a number).
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

    def shown(self, x: float) -> str:
        """x (the value or a spread in us) as printed: latencies to the nanosecond (their spread between captures is
        ~0.1 us), rates to one decimal."""
        return f"{x:.3f}" if self.unit == "us" else f"{x:.1f}"


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


PROBE_LAUNCHES = 64          # launches per graph replay of the latency probes


def probe_graph_us(call, count, per_launch: int, max_time_s: float) -> timing.Summary:
    """Per-launch time of one captured graph of PROBE_LAUNCHES calls, after a first replay from a zeroed count that
    must come to PROBE_LAUNCHES x per_launch (every launch ran its work)."""
    timing.require_cuda()
    graph, _ = timing.capture_graph([call], PROBE_LAUNCHES)
    count.zero_()
    graph.replay()
    torch.cuda.synchronize()
    got, want = int(count.item()), PROBE_LAUNCHES * per_launch
    if got != want:
        raise RuntimeError(f"latency probe: the counter reads {got} after one replay of {PROBE_LAUNCHES} launches, "
                           f"expected {want}")
    return timing.time_replays(graph, PROBE_LAUNCHES, max_time_s=max_time_s, target_rse=0.005)


def _probe_buffers(dev):
    from kernelbench.kernels.attention import sm_count
    programs = sm_count(dev)                                   # one program per SM: a full wave, no tail
    count = torch.zeros(1, dtype=torch.int32, device=dev)
    return programs, count


def launch_latency(max_time_s: float = 0.5, pdl: bool = False) -> Ceiling:
    from kernelbench.kernels.probe import launch_probe
    dev = timing.require_cuda()
    if pdl and torch.cuda.get_device_capability(dev)[0] < 9:
        raise RuntimeError("programmatic dependent launch needs sm_90 or newer")
    programs, count = _probe_buffers(dev)
    s = probe_graph_us(lambda: launch_probe(count, programs, pdl), count, 1, max_time_s)
    name = "launch_pdl_us" if pdl else "launch_us"
    return Ceiling(name, s.median_us, "us", s,
                   f"{PROBE_LAUNCHES} dependent launches of {programs} programs (one per SM) doing next to nothing"
                   f"{' with programmatic dependent launch' if pdl else ''}, per CUDA graph replay; median per launch")


def launch_latency_pdl(max_time_s: float = 0.5) -> Ceiling:
    return launch_latency(max_time_s, pdl=True)


def ticket_latency(max_time_s: float = 0.5) -> Ceiling:
    from kernelbench.kernels.probe import ticket_probe
    dev = timing.require_cuda()
    programs, count = _probe_buffers(dev)
    part = torch.zeros(programs, dtype=torch.int32, device=dev)
    ticket = torch.zeros(1, dtype=torch.int32, device=dev)
    base = launch_latency(max_time_s)
    s = probe_graph_us(lambda: ticket_probe(part, ticket, count), count, programs * (programs + 1) // 2,
                        max_time_s)
    extra = timing.summarize([v - base.value for v in s.samples])
    return Ceiling("ticket_us", extra.median_us, "us", extra,
                   f"{PROBE_LAUNCHES} dependent launches of {programs} programs, each storing a partial and taking "
                   f"an acq_rel ticket, the last summing the partials, per CUDA graph replay; median per launch "
                   f"less launch_us of the same call ({base.value:.3f} us)")


MEASURES = {"copy_gbps": copy_bandwidth, "l2_gbps": l2_bandwidth, "bf16_tflops": bf16_matmul,
            "fp8_tflops": fp8_matmul, "launch_us": launch_latency, "launch_pdl_us": launch_latency_pdl,
            "ticket_us": ticket_latency}


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
        log(f"{name}: {c.shown(c.value)} {c.unit} (median of {c.summary.n}, IQR {c.shown(c.summary.iqr_us)} us)")
        out.append(c)
    return out


def store_ceilings(store, env_id: int, ceilings: list[Ceiling], git_commit: str = "") -> None:
    store.add_calibrations(dict(environment_id=env_id, measure=c.measure, value=c.value, unit=c.unit,
                                samples=c.summary.samples, method=c.method, git_commit=git_commit)
                           for c in ceilings)


def load_ceilings(store, env_id: int | None = None, gpu_name: str | None = None) -> dict[str, float]:
    """The newest value of each measure for an environment (or any environment of a GPU name)."""
    return store.newest_calibrations(env_id, gpu_name)
