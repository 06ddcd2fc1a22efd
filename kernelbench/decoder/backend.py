"""The one seam between the decoder and the ops: `Ops("reference")` calls the reference of every op,
`Ops("triton")` the Triton kernel where one is registered (the reference otherwise, reported by
`fallbacks`). Model code calls `ops.rms_norm(x=..., weight=..., eps=...)` with the keyword
signature of docs/OPS.md."""
from __future__ import annotations

import inspect
from typing import Callable

from kernelbench import registry


class Ops:
    def __init__(self, impl: str = "reference", overrides: dict[str, str] | None = None):
        self.impl = impl
        self.overrides = dict(overrides or {})
        self.fallbacks: set[str] = set()
        self._cache: dict[str, Callable] = {}
        self._accepts: dict[tuple[str, str], bool] = {}

    def resolve(self, op: str) -> registry.Impl:
        want = self.overrides.get(op, self.impl)
        available = registry.impls(op)
        if want in available:
            return available[want]
        self.fallbacks.add(op)
        return available["reference"]

    def use(self, op: str, impl: str) -> None:
        """Run `impl` for `op` from now on (as --use does), forgetting what was resolved for op before."""
        self.overrides[op] = impl
        self._cache.pop(op, None)
        for key in [k for k in self._accepts if k[0] == op]:
            del self._accepts[key]

    def prepare(self, op: str, weights: dict) -> dict:
        """`weights` (official layout, a subset of op's inputs) in the layout the chosen implementation of op
        runs on (registry.Impl.prepare), once at load; unchanged for implementations without one."""
        return self.resolve(op).prepared(weights)

    def accepts(self, op: str, name: str) -> bool:
        """Whether the chosen implementation of op takes the keyword `name` (an optional input of the op's
        contract, docs/OPS.md, that an implementation may leave out, e.g. moe_experts' shared_* weights)."""
        key = (op, name)
        if key not in self._accepts:            # asked per layer per step: once per (op, name)
            try:
                self._accepts[key] = name in inspect.signature(self.resolve(op).fn).parameters
            except (TypeError, ValueError):     # a builtin or C callable without a signature
                self._accepts[key] = False
        return self._accepts[key]

    def fuses(self, op: str, parts: tuple[str, ...]) -> bool:
        """Whether the model calls `op`, a composite of the ops `parts`, rather than the parts one by one: when op
        is chosen explicitly (an override), or when no part is (a --use of a part keeps the parts, so that override
        runs) and this backend's implementation has op."""
        if op in self.overrides:
            return True
        return not set(parts) & set(self.overrides) and self.impl in registry.impls(op)

    def __getattr__(self, op: str) -> Callable:
        if op.startswith("_"):
            raise AttributeError(op)
        fn = self._cache.get(op)
        if fn is None:
            fn = self._cache[op] = self.resolve(op).fn
        return fn
