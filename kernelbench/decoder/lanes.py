"""Two lanes of work in one decode step: the main stream and a side stream that runs beside it.

At decode sizes most kernels of a layer fill a fraction of the GPU and their time is latency, so two independent
chains of kernels finish sooner side by side than one after the other. In an attention layer the compressor steps
and the indexer's weights projection read only the layer input x, and the indexer's top-k needs only the indexer
query and those caches; none of them waits on the attention front or the attention q path (model.Attention).

`Lanes.side()` runs its block on the side stream after all work the main stream has queued so far (an event
wait: the side's inputs are ready), on kernel lane 1 (kernels/common.py `lane`: its own split-K tickets and
counters, so two concurrent kernels never share one). `Lanes.join()` makes the main stream wait for everything the
side queued. Both are recorded into a CUDA graph as edges (the side stream forks from and joins the capture
stream), so a captured step replays with the same overlap.

Tensor lifetimes: a tensor the side allocates and main reads after the join is freed into the side stream's pool;
the side only reuses it in a later `side()` block, which first waits for main's work up to that point, including
the reader. A tensor main allocates and the side reads stays referenced until after the join. Every layer that
enters the side joins before it returns, so no side work is left pending at the end of a step (graph capture
requires it).

Without overlap (a CPU device, or `overlap=False`) the same blocks run in program order on the current stream, on
lane 1: the kernels and their inputs are the same, so the outputs are too (tests/test_lanes.py)."""
from __future__ import annotations

import contextlib

import torch

from kernelbench.kernels.common import lane

SIDE_LANE = 1


class Lanes:
    def __init__(self, device, overlap: bool = True):
        self.device = torch.device(device)
        self.overlap = bool(overlap) and self.device.type == "cuda"
        self._stream = None
        self.pending = False          # side work queued since the last join

    def _side_stream(self):
        if self._stream is None:
            self._stream = torch.cuda.Stream(self.device)
        return self._stream

    @contextlib.contextmanager
    def side(self):
        """The block's launches on the side stream (after main's queued work) and lane 1."""
        with lane(SIDE_LANE):
            if not self.overlap:
                yield
                return
            s = self._side_stream()
            s.wait_stream(torch.cuda.current_stream(self.device))
            self.pending = True
            with torch.cuda.stream(s):
                yield

    def join(self) -> None:
        """The main stream waits for the side's queued work."""
        if self.overlap and self.pending:
            torch.cuda.current_stream(self.device).wait_stream(self._side_stream())
        self.pending = False
