"""Semantic probes: small inputs built so that one rule of an op's SPEC dominates the output.

Random inputs hide rules whose violation is numerically small (a SwiGLU gate clamped from below too
moves an output by ~4.5e-4 * up where the gate is below -limit; a Sinkhorn loop one iteration short is
invisible at 20 iterations). A probe fixes params and builds inputs where the rule decides the result,
with a tolerance derived for that input (its `why`), so that breaking the rule fails by a wide margin.

    spec.probes = (Probe("swiglu_gate_below", "gate clamped above only", params, build, tolerance), ...)

`kernelbench verify` runs an op's probes before its random examples (`run_probes`); each is reported
and recorded like an example whose value mode is "probe:<name>" and source "probe", and replays with
`kernelbench verify OP --impl I --params ... --values probe:<name>`. Probes are declared in
kernelbench/ops/probes.py.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Callable

import torch

from kernelbench.registry import OpSpec, Tolerance

PREFIX = "probe:"


@dataclass(frozen=True)
class Probe:
    name: str
    rule: str                                                  # the SPEC rule it isolates
    params: dict
    build: Callable[[dict, torch.Generator, str], dict]        # (params, gen, device) -> inputs
    tolerance: Callable[[dict], dict[str, Tolerance]]


def attach(spec: OpSpec, *probes: Probe) -> None:
    names = {p.name for p in spec.probes}
    for p in probes:
        if p.name in names:
            raise ValueError(f"{spec.name}: probe {p.name!r} declared twice")
        names.add(p.name)
    spec.probes = tuple(spec.probes) + tuple(probes)


def find(spec: OpSpec, values: str) -> Probe | None:
    """The probe a value mode names ("probe:<name>"), None for an ordinary value mode."""
    if not values.startswith(PREFIX):
        return None
    name = values[len(PREFIX):]
    for p in spec.probes:
        if p.name == name:
            return p
    raise ValueError(f"op {spec.name!r} has no probe {name!r}; it has: "
                     f"{', '.join(p.name for p in spec.probes) or 'none'}")


def spec_for(spec: OpSpec, values: str) -> OpSpec:
    """The spec to check an example with: for a probe value mode, inputs and tolerance are the probe's."""
    probe = find(spec, values)
    if probe is None:
        return spec
    return dataclasses.replace(spec, make_inputs=lambda p, gen, device, v: probe.build(p, gen, device),
                               tolerance=probe.tolerance)


def run_probes(spec: OpSpec, impl, device: str, emit: Callable) -> int:
    """Check `impl` on every probe of `spec`; each result goes to `emit`. Returns how many failed."""
    from kernelbench.harness.verify_check import Example, check_example
    failed = 0
    for probe in spec.probes:
        ex = Example(spec.name, impl.name, dict(probe.params), PREFIX + probe.name, 0, "contiguous", "probe")
        r = check_example(spec_for(spec, ex.values), impl, ex, device)
        if not r.passed:
            r.failure = f"probe {probe.name!r} ({probe.rule}):\n{r.failure}"
            failed += 1
        emit(r)
    return failed
