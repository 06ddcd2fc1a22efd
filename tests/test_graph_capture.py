"""The Triton decode step is CUDA-graph capturable: no host synchronisation, no host-sized shapes.

No GPU here, so capture itself cannot run. Instead the decode step of the Triton backend (through the
Triton interpreter) runs under `no_host_sync()`, which makes every way of reading a tensor's values on
the host raise: `.item()`, `.tolist()`, `.cpu()`, `.numpy()`, `bool()/int()/float()/index()` of a
tensor (Python branching, host-sized allocations, slicing by a tensor), and the ops whose output
shape depends on values (`nonzero`, `unique`, `masked_select`, boolean-mask indexing, a factory such
as `torch.empty` or `torch.arange` given a tensor). Calls made by
the Triton interpreter itself (frames inside the `triton` package: on a GPU those are a launch) are
allowed, and so are the few checks that the wrappers run only for CPU tensors (ALLOWED_CPU_CHECKS,
each verified below to sit under a `device.type == "cpu"` test).
What this cannot see: a device->host copy written as `.to("cpu")` (every tensor is on the CPU here)
and host work outside the ops (the model code around them is audited by the same guard, since it
runs inside it)."""
from __future__ import annotations

import inspect
import os
import sys
from contextlib import contextmanager
from pathlib import Path

import pytest
import torch
import triton

from kernelbench.decoder import checkpoint
from kernelbench import registry
from kernelbench.decoder.backend import Ops
from kernelbench.decoder.decode_bench import bench_config
from kernelbench.decoder.model import Transformer
from kernelbench.decoder.tp import TPContext

pytestmark = pytest.mark.skipif(os.environ.get("TRITON_INTERPRET") != "1",
                                reason="runs the Triton decode step in the interpreter (TRITON_INTERPRET=1)")

TRITON_DIR = str(Path(triton.__file__).parent)
# (file suffix, function) of a value check and (file suffix, function) of the wrapper that runs it only
# for CPU tensors
ALLOWED_CPU_CHECKS = {("reference/kv.py", "_check_tokens"): ("kernels/kv.py", "kv_write")}


class HostSyncError(RuntimeError):
    pass


def _allowed(frame) -> bool:
    f = frame
    while f is not None:
        code = f.f_code
        if code.co_filename.startswith(TRITON_DIR):
            return True                                          # the interpreter's own launch machinery
        for (file, fn), (wfile, wfn) in ALLOWED_CPU_CHECKS.items():
            if code.co_name == fn and code.co_filename.endswith(file) and f.f_back is not None and \
                    f.f_back.f_code.co_name == wfn and f.f_back.f_code.co_filename.endswith(wfile):
                return True
        f = f.f_back
    return False


def _wrap(name, orig, pred=None):
    def guarded(*args, **kwargs):
        if (pred is None or pred(*args, **kwargs)) and not _allowed(sys._getframe(1)):
            raise HostSyncError(f"host synchronisation in the decode step: {name}")
        return orig(*args, **kwargs)
    return guarded


def _bool_index(self, idx, *rest):
    items = idx if isinstance(idx, tuple) else (idx,)
    return any(isinstance(i, torch.Tensor) and i.dtype == torch.bool for i in items)


def _tensor_arg(*args, **kwargs):
    """A factory sized (or filled) by a tensor reads it on the host."""
    flat = list(args) + [a for v in args if isinstance(v, (tuple, list)) for a in v] + list(kwargs.values())
    return any(isinstance(a, torch.Tensor) for a in flat)


FACTORIES = ("empty", "zeros", "ones", "full", "arange", "randn", "rand", "randint", "randperm", "tensor")


@contextmanager
def no_host_sync():
    methods = ["item", "tolist", "cpu", "numpy", "__bool__", "__int__", "__float__", "__index__", "nonzero",
               "unique", "masked_select"]
    saved = [(torch.Tensor, m, getattr(torch.Tensor, m)) for m in methods]
    saved += [(torch.Tensor, m, getattr(torch.Tensor, m)) for m in ("__getitem__", "__setitem__")]
    saved += [(torch, m, getattr(torch, m)) for m in ("nonzero", "unique", "masked_select") + FACTORIES]
    try:
        for owner, m, orig in saved:
            pred = _bool_index if m in ("__getitem__", "__setitem__") else _tensor_arg if m in FACTORIES else None
            setattr(owner, m, _wrap(f"{owner.__name__}.{m}", orig, pred))
        yield
    finally:
        for owner, m, orig in saved:
            setattr(owner, m, orig)


def test_guard_catches_host_syncs():
    x = torch.arange(4)
    with no_host_sync():
        for bad in (lambda: x.sum().item(), lambda: x.tolist(), lambda: int(x.max()), lambda: bool(x.any()),
                    lambda: torch.empty(x[2]), lambda: x[x > 1], lambda: x.nonzero(), lambda: x.cpu(),
                    lambda: torch.unique(x), lambda: [0, 1, 2, 3][x[1]], lambda: torch.arange(x[3]),
                    lambda: torch.zeros((2, x[1]))):
            with pytest.raises(HostSyncError):
                bad()
        y = torch.where(x > 1, x, 0) + x[1:3].sum()              # device-side work passes
    assert y.tolist() == [3, 3, 5, 6]
    assert x.tolist() == [0, 1, 2, 3]                            # restored


def test_allowed_cpu_checks_are_cpu_only():
    """Each allowed check is reached only through a `device.type == "cpu"` branch of its wrapper."""
    from kernelbench.kernels import kv as KV
    for (file, fn), (wfile, wfn) in ALLOWED_CPU_CHECKS.items():
        src = inspect.getsource(getattr(KV, wfn))
        lines = [ln for ln in src.splitlines() if fn + "(" in ln]
        assert lines, (wfn, fn)
        i = src.splitlines().index(lines[0])
        assert 'device.type == "cpu"' in src.splitlines()[i - 1] or 'device.type == "cpu"' in lines[0], lines[0]


def test_triton_decode_step_has_no_host_sync():
    """The decode step decode-bench captures (check=False): every layer kind (SWA, CSA, HCA), a ragged
    batch whose sequences sit before and past the first compressed entries, all ops Triton (no
    reference fallback), no host read of a tensor anywhere in it."""
    cfg = bench_config("tiny", "swa,csa,hca")
    sd = checkpoint.random_local_state(cfg, 0, 1, seed=0, device=torch.device("cpu"))
    model = Transformer(cfg, sd, Ops("triton"), TPContext(), "cpu")
    cache = model.new_cache(3, 64)
    cache.fill_random(torch.Generator().manual_seed(0))
    ids = torch.tensor([5, 9, 11])
    positions = torch.tensor([39, 2, 16])
    seq_ids = torch.tensor([2, 0, 1])
    registry.load_builtin()                  # module imports compute tables on the host: before capture
    with no_host_sync():
        logits, h = model.decode(ids, positions, seq_ids, cache, check=False)
        with pytest.raises(HostSyncError):                       # the input checks do read the host
            model.decode(ids, positions, seq_ids, cache, check=True)
    assert model.ops.fallbacks == set(), model.ops.fallbacks
    used = {op.name for op in registry.ops()} & set(model.ops._cache)
    assert used and {"attention_indices", "sparse_attention_wo_a", "csa_indices", "compressor_step", "attention_front",
                     "attention_q"} <= used
    # the guard sees inside the step: the reference attention_indices (it validates values on the host) trips it
    model.env.ops = Ops("triton", overrides={"attention_indices": "reference"})
    with no_host_sync(), pytest.raises(HostSyncError):
        model.decode(ids, positions, seq_ids, cache, check=False)
    model.env.ops = Ops("triton")
    assert torch.isfinite(logits).all() and logits.shape == (3, cfg.vocab_size)
