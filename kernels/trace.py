"""In-kernel timeline: when each program of a traced launch started, passed its wait, reached its finish and ended.

Kernel profilers give a launch's span; under PDL and with tickets, a span hides what its programs did inside it (a
program may sit in `griddepcontrol.wait` for most of it). A traced launch writes, per program, four marks:

    0 start          first instruction (before any prefetch)
    1 released       after its PDL wait (or its release without a wait); = start without PDL
    2 finish         its GEMM / scoring work done, before its split-K ticket and the last arrival's tail
    3 end            last instruction

each as %globaltimer (ns, one clock for every SM) and %clock64 (the SM's cycle counter: finer, but per SM), with the
program's SM (%smid) and a kind the kernel names (the MoE grouped launches: 0 shared-expert item, 1 routed item with
work, 2 routed item past the active count), and up to STEPS sub-step marks inside one long stretch of a program
(`trace_step`: the MoE gate's last program, from its ticket to its routing lists; with GATE_TAIL "up" each routed
W1/W3 program's own top-k). Row layout: SLOTS int64 per
program (`FIELDS` below).

Tracing is off unless a `recording()` is active: a launch site asks `trace_args(label, programs, device)`, which is
{} outside a recording (the kernels' TRACE constexpr stays False and they compile to the same binaries), and inside
it hands out the launch's rows of the recording's arena and returns {"TRACE": True, "trace_ptr": rows}. It is
compiled-only (inline PTX): under the interpreter `recording` refuses. Only the MoE launches take it today
(kernels/moe.py); scripts/moe_timeline.py captures a graph under a recording and summarises the replays.
"""
from __future__ import annotations

import contextlib
import contextvars
from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from kernelbench.kernels.common import INTERPRET

SLOTS = 16
MARKS = ("start", "released", "finish", "end")
STEPS = 6                       # sub-step marks (%globaltimer) a kernel may add inside one stretch, slots 10..15
FIELDS = {**{f"ns_{m}": i for i, m in enumerate(MARKS)}, **{f"clk_{m}": 4 + i for i, m in enumerate(MARKS)},
          "smid": 8, "kind": 9, **{f"ns_step{i}": 10 + i for i in range(STEPS)}}


@triton.jit
def _globaltimer():
    return tl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l", [], dtype=tl.int64, is_pure=False, pack=1)


@triton.jit
def _clock64():
    return tl.inline_asm_elementwise("mov.u64 $0, %clock64;", "=l", [], dtype=tl.int64, is_pure=False, pack=1)


@triton.jit
def _smid():
    return tl.inline_asm_elementwise("mov.u32 $0, %smid;", "=r", [], dtype=tl.int32, is_pure=False, pack=1)


_ROW = tl.constexpr(SLOTS)
_CLK = tl.constexpr(FIELDS["clk_start"])
_SMID = tl.constexpr(FIELDS["smid"])
_KIND = tl.constexpr(FIELDS["kind"])
_STEP = tl.constexpr(FIELDS["ns_step0"])


@triton.jit
def _row(trace_ptr):
    """This program's row of the launch's marks."""
    return trace_ptr + tl.program_id(0).to(tl.int64) * _ROW


@triton.jit
def trace_mark(trace_ptr, MARK: tl.constexpr, TRACE: tl.constexpr):
    """With TRACE: this program's mark MARK (0..3, `MARKS`) now. Without: nothing (no code)."""
    if TRACE:
        row = _row(trace_ptr)
        tl.store(row + MARK, _globaltimer())
        tl.store(row + _CLK + MARK, _clock64())
        if MARK == 0:
            tl.store(row + _SMID, _smid().to(tl.int64))


@triton.jit
def trace_step(trace_ptr, STEP: tl.constexpr, TRACE: tl.constexpr):
    """With TRACE: sub-step mark STEP (0..STEPS-1) now, %globaltimer only: where a long stretch of one program goes
    (the MoE gate's last program: its ticket, scores, top-k, weights, routing lists; a grouped launch's finishing
    program: its ticket won, its block stored)."""
    if TRACE:
        tl.store(_row(trace_ptr) + _STEP + STEP, _globaltimer())


@triton.jit
def trace_step_after(trace_ptr, STEP: tl.constexpr, x, TRACE: tl.constexpr):
    """trace_step once the values of x (a 2-D block) exist: the timer read takes them as an (unused) operand, so it
    cannot issue before them (a plain read has no operands and may issue while loads behind x are in flight). The
    thread holding x[0, 0] stores its read."""
    if TRACE:
        t = tl.inline_asm_elementwise("mov.u64 $0, %globaltimer; // $1", "=l,r", [x.to(tl.int32)], dtype=tl.int64,
                                      is_pure=False, pack=1)
        first = (tl.arange(0, x.shape[0])[:, None] == 0) & (tl.arange(0, x.shape[1])[None, :] == 0)
        tl.store(_row(trace_ptr) + _STEP + STEP + tl.zeros(x.shape, tl.int64), t, mask=first)


@triton.jit
def trace_kind(trace_ptr, KIND: tl.constexpr, TRACE: tl.constexpr):
    """With TRACE: this program's kind (a small int the kernel defines)."""
    if TRACE:
        tl.store(_row(trace_ptr) + _KIND, tl.full((), KIND, tl.int64))


@dataclass
class TracedLaunch:
    label: str
    rows: torch.Tensor          # (programs, SLOTS) int64, a slice of the recording's arena


# Rows come from one arena the recording allocates before any traced launch, never from the caching allocator per
# launch: mark 0 is stored before a program's PDL wait, while the kernel before it may still run, and a buffer that
# kernel uses may already be free to the allocator (its Python owner gone); rows allocated there could alias it (a
# session-47 H100 run replayed a graph whose first marks overwrote the previous call's live buffers: an illegal
# address in the hash-routed layer). The arena is the recording's alone, so no kernel of the step ever sees it.
ARENA_ROWS = 1 << 18            # 32 MiB: a 64-token moe_layer call is ~14k programs over its three launches


class Recording:
    def __init__(self, capacity_rows: int = ARENA_ROWS):
        if capacity_rows < 1:
            raise ValueError(f"kernels.trace: capacity_rows must be >= 1, got {capacity_rows}")
        self.capacity_rows = capacity_rows
        self.launches: list[TracedLaunch] = []
        self._arena: torch.Tensor | None = None
        self._used = 0

    def rows_for(self, label: str, programs: int, device) -> torch.Tensor:
        """The next `programs` rows of the arena (allocated on first use: call once before a graph capture, e.g. by
        an eager warm-up call, so the arena is not a block of the graph's pool)."""
        if self._arena is None:
            self._arena = torch.full((self.capacity_rows, SLOTS), -1, dtype=torch.int64, device=device)
        elif self._arena.device != torch.device(device):
            raise RuntimeError(f"kernels.trace: {label} runs on {device}, the recording's arena is on "
                               f"{self._arena.device}")
        if self._used + programs > self.capacity_rows:
            raise RuntimeError(f"kernels.trace: the recording's arena ({self.capacity_rows} rows) is full at {label} "
                               f"({programs} programs more after {self._used}); record fewer calls or pass a larger "
                               "capacity_rows to recording()")
        rows = self._arena[self._used:self._used + programs]
        self._used += programs
        self.launches.append(TracedLaunch(label, rows))
        return rows

    def keep_last_calls(self, calls: int, kept: int) -> int:
        """After `calls` calls of one op (warm-up first, then a graph's capture), keep only the launches of the last
        `kept` (the graph's: every replay rewrites their rows) -> traced launches per call. The warm-up's rows stay
        used: the arena never hands a row out twice."""
        if not 0 < kept <= calls or len(self.launches) % calls:
            raise ValueError(f"kernels.trace: {len(self.launches)} traced launches are not {calls} calls of the same "
                             f"launches, or {kept} is not a count of the last of them")
        per_call = len(self.launches) // calls
        self.launches = self.launches[(calls - kept) * per_call:]
        return per_call

    def reset(self) -> None:
        """Every row back to -1 (a mark never reached stays -1): call it before each replay, outside the graph."""
        if self._arena is not None:
            self._arena.fill_(-1)

    def snapshot(self) -> list[dict]:
        """Every traced launch's rows as they stand now, on the CPU: [{label, rows (programs, SLOTS) int64}]."""
        return [{"label": t.label, "rows": t.rows.cpu().clone()} for t in self.launches]


_RECORDING: contextvars.ContextVar[Recording | None] = contextvars.ContextVar("kernelbench_trace", default=None)


@contextlib.contextmanager
def recording(capacity_rows: int = ARENA_ROWS):
    """Launches of traced kernels inside write their programs' marks into rows of this recording's arena (capture a
    CUDA graph inside it, after one eager warm-up call, and every replay rewrites the same rows)."""
    if INTERPRET:
        raise RuntimeError("kernels.trace: the in-kernel timeline reads %globaltimer / %clock64 (inline PTX); it runs "
                           "compiled on a CUDA GPU only, not under TRITON_INTERPRET=1")
    rec = Recording(capacity_rows)
    token = _RECORDING.set(rec)
    try:
        yield rec
    finally:
        _RECORDING.reset(token)


def trace_args(label: str, programs: int, device) -> dict:
    """Launch keywords of a traced kernel: {} outside a `recording()`; inside one, the launch's rows of the
    recording's arena and TRACE on."""
    rec = _RECORDING.get()
    if rec is None:
        return {}
    if torch.device(device).type != "cuda":
        raise RuntimeError(f"kernels.trace: {label} runs on {device}; the in-kernel timeline needs a CUDA device")
    return {"TRACE": True, "trace_ptr": rec.rows_for(label, programs, device)}
