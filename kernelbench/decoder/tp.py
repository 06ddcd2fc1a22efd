"""Tensor parallelism: the rank/world context the decoder's layers read, its two collectives, and a
launcher that runs a function in N local processes (torch.distributed, gloo on CPU) for tests.

Rank and world travel in a `TPContext` object (never module globals), so one Python process can hold
models of several TP layouts, and a test can run TP1, TP2 and TP4 side by side. At world 1 the
collectives are no-ops and no process group exists.

    ctx = TPContext()                        # TP1
    ctx = TPContext.from_env()               # under torchrun: RANK / WORLD_SIZE / LOCAL_RANK
    results = launch(fn, world=4, args=(x,)) # fn(ctx, x) in 4 processes; results[r] from rank r
    ctx = TPContext(rank=0, world=8, simulate=True)  # rank 0's shapes of TP8 on one device,
                                                     # collectives skipped (decode-bench on 1 GPU)
"""
from __future__ import annotations

import io
import os
import socket
import time
import traceback
from dataclasses import dataclass
from typing import Any, Callable

import torch
import torch.distributed as dist

from kernelbench.config import divide

# the profiler range names of the two collectives (decode-bench attributes their kernels to these rows)
COLLECTIVES = ("all_reduce", "all_gather")


@dataclass
class TPContext:
    rank: int = 0
    world: int = 1
    group: Any = None          # torch.distributed process group; None = the default group
    simulate: bool = False     # per-rank shapes of `world` ranks in one process; collectives skipped

    def __post_init__(self):
        if self.world < 1 or not 0 <= self.rank < self.world:
            raise ValueError(f"bad TP layout: rank {self.rank} of world {self.world}")

    @property
    def active(self) -> bool:
        """True when collectives really communicate (world > 1 and not simulated)."""
        return self.world > 1 and not self.simulate

    def part(self, n: int, what: str = "dimension") -> int:
        """This rank's share of n (n must split evenly)."""
        try:
            return divide(n, self.world)
        except ValueError:
            raise ValueError(f"{what}={n} is not divisible by TP={self.world}") from None

    def start(self, n: int) -> int:
        """First index of this rank's share of n."""
        return self.rank * self.part(n)

    def all_reduce(self, x: torch.Tensor) -> torch.Tensor:
        """Sum over ranks, in place; returns x. No-op at world 1."""
        if self.active:
            with torch.profiler.record_function("all_reduce"):
                dist.all_reduce(x, op=dist.ReduceOp.SUM, group=self.group)
        return x

    def all_gather(self, x: torch.Tensor, dim: int = -1) -> torch.Tensor:
        """Concatenate every rank's x along dim, in rank order. Identity at world 1 (and when
        simulated: the caller then sees only its own shard)."""
        if not self.active:
            return x
        with torch.profiler.record_function("all_gather"):
            parts = [torch.empty_like(x) for _ in range(self.world)]
            dist.all_gather(parts, x.contiguous(), group=self.group)
            return torch.cat(parts, dim=dim)

    def barrier(self) -> None:
        if self.active:
            dist.barrier(group=self.group)

    @classmethod
    def from_env(cls, backend: str | None = None) -> "TPContext":
        """The context of a torchrun-style launch (RANK, WORLD_SIZE, MASTER_ADDR/PORT set); TP1 when
        WORLD_SIZE is unset or 1. Initialises the default process group if needed (nccl when CUDA is
        available, else gloo) and pins LOCAL_RANK's GPU."""
        world = int(os.environ.get("WORLD_SIZE", "1"))
        if world == 1:
            return cls()
        rank = int(os.environ["RANK"])
        if torch.cuda.is_available():
            torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", rank)))
        if not dist.is_initialized():
            dist.init_process_group(backend or ("nccl" if torch.cuda.is_available() else "gloo"))
        return cls(rank=rank, world=world)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _worker(rank: int, world: int, port: int, fn: Callable, args: tuple, queue, threads: int) -> None:
    try:
        torch.set_num_threads(threads)
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
        try:
            out = fn(TPContext(rank=rank, world=world), *args)
        finally:
            dist.destroy_process_group()
        buf = io.BytesIO()          # plain bytes: shared-memory tensors die with the child process
        torch.save(out, buf)
        queue.put((rank, True, buf.getvalue()))
    except BaseException:  # noqa: BLE001 - reported to the parent with the traceback
        queue.put((rank, False, traceback.format_exc()))


class LaunchError(RuntimeError):
    pass


def launch(fn: Callable, world: int, args: tuple = (), timeout: float = 600.0, threads: int = 1) -> list:
    """Run fn(ctx, *args) in `world` CPU processes joined by a gloo process group; return the list of
    results in rank order (results must be picklable; tensors are fine). fn must be importable
    (a module-level function). An exception in any rank raises LaunchError with that rank's
    traceback. world=1 runs fn in this process with a TP1 context."""
    if world < 1:
        raise ValueError(f"world must be >= 1, got {world}")
    if world == 1:
        return [fn(TPContext(), *args)]
    ctx = torch.multiprocessing.get_context("spawn")
    queue = ctx.SimpleQueue()
    port = _free_port()
    procs = [ctx.Process(target=_worker, args=(r, world, port, fn, args, queue, threads), daemon=True)
             for r in range(world)]
    for p in procs:
        p.start()
    results: dict[int, Any] = {}
    errors: list[str] = []
    deadline = time.monotonic() + timeout
    while len(results) < world and not errors:   # one failed rank can leave the others blocked
        if time.monotonic() > deadline:
            break
        if queue.empty():
            if not any(p.is_alive() for p in procs) and queue.empty():
                break
            time.sleep(0.05)
            continue
        rank, ok, out = queue.get()
        if ok:
            results[rank] = torch.load(io.BytesIO(out), weights_only=False)
        else:
            errors.append(f"rank {rank}:\n{out}")
    for p in procs:
        p.join(timeout=5)
        if p.is_alive():
            p.terminate()
    if errors:
        raise LaunchError(f"{len(errors)} of {world} ranks failed:\n" + "\n".join(errors))
    missing = [r for r in range(world) if r not in results]
    if missing:
        codes = {r: procs[r].exitcode for r in missing}
        raise LaunchError(f"ranks {missing} returned nothing (exit codes {codes}; timeout {timeout:.0f} s)")
    return [results[r] for r in range(world)]
