"""The one seam between the decoder and the ops: `Ops("reference")` calls the reference of every op,
`Ops("triton")` the Triton kernel where one is registered (the reference otherwise, reported by
`fallbacks`). Model code calls `ops.rms_norm(x=..., weight=..., eps=...)` with the keyword
signature of docs/OPS.md."""
from __future__ import annotations

from typing import Callable

from kernelbench import registry


class Ops:
    def __init__(self, impl: str = "reference", overrides: dict[str, str] | None = None):
        self.impl = impl
        self.overrides = dict(overrides or {})
        self.fallbacks: set[str] = set()
        self._cache: dict[str, Callable] = {}

    def resolve(self, op: str) -> registry.Impl:
        want = self.overrides.get(op, self.impl)
        available = registry.impls(op)
        if want in available:
            return available[want]
        self.fallbacks.add(op)
        return available["reference"]

    def prepare(self, op: str, weights: dict) -> dict:
        """`weights` (official layout, a subset of op's inputs) in the layout the chosen implementation of op
        runs on (registry.Impl.prepare), once at load; unchanged for implementations without one."""
        return self.resolve(op).prepared(weights)

    def __getattr__(self, op: str) -> Callable:
        if op.startswith("_"):
            raise AttributeError(op)
        fn = self._cache.get(op)
        if fn is None:
            fn = self._cache[op] = self.resolve(op).fn
        return fn
