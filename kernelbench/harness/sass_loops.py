"""Global loads inside a kernel's loops, read from its SASS: which are waited on in their own iteration.

A load the compiler pipelines (`LDGSTS`, cp.async into shared memory) is in flight several iterations ahead. A plain
`LDG` in a loop body is issued where the code asks for it; when its first reader comes later in the same iteration,
the warp waits the load's latency there unless enough independent work lies between (an L2 hit is hundreds of
cycles, tens of instructions do not cover it). Loaded a step ahead, its first reader is in the next iteration.
Session 35's Nsight Compute source view of fp8_linear's K loop stalled on exactly such loads (docs/perf/linear.md,
PREFETCH "staged"); this module finds them without a GPU.

`loop_loads(sass)` -> one LoopLoad per plain global load (`LDG*`) inside a loop (a backward branch's range, the
innermost that holds it): its address, opcode, and its first reader's distance in instructions, the search wrapping
from the loop's end to its start (`ahead`: the first reader is in the next iteration). A load whose registers are
overwritten before any read, or never read in the loop, has no reader (`distance` None). Registers are followed
by name only (predicates and the other path of a branch are not), so this is a reading aid, not a proof.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

_INSTR = re.compile(r"^\s*/\*([0-9a-f]+)\*/\s+(?:@!?U?P[T0-9]+\s+)?([A-Z][A-Z0-9_.]*)\s*([^;]*);")
_REG = re.compile(r"(?<![A-Z0-9_])R(\d+)(\.64)?(?![0-9])")
_BRANCH_TARGET = re.compile(r"0x([0-9a-f]+)")
_WIDTH = {".64": 2, ".128": 4}


@dataclass
class LoopLoad:
    addr: int
    opcode: str
    distance: int | None       # instructions to the first reader (None: no reader in the loop)
    ahead: bool                # the first reader is in the next iteration (the search wrapped)


@dataclass
class _Instr:
    addr: int
    opcode: str
    operands: list[str]


def parse(sass: str) -> list[_Instr]:
    """The SASS lines of `cuobjdump -sass` (one kernel's text, or several in order) as instructions."""
    out = []
    for line in sass.splitlines():
        m = _INSTR.match(line)
        if m:
            ops = [o.strip() for o in m.group(3).split(",")] if m.group(3).strip() else []
            out.append(_Instr(int(m.group(1), 16), m.group(2), ops))
    return out


def _regs(operand: str) -> set[int]:
    regs = set()
    for n, wide in _REG.findall(operand):
        regs.add(int(n))
        if wide:                      # R24.64: the pair R24, R25 (an address)
            regs.add(int(n) + 1)
    return regs


def _writes_first_operand(opcode: str) -> bool:
    """Whether the first operand is a destination (not for stores, reductions, branches, barriers)."""
    return not opcode.startswith(("ST", "RED", "BRA", "BAR", "EXIT", "RET", "CALL", "WARPSYNC", "DEPBAR", "MEMBAR",
                                  "FENCE", "NOP", "ERRBAR", "CCTL", "YIELD", "BSYNC", "BSSY", "LDGSTS",
                                  "LDGDEPBAR", "WARPGROUP", "ARRIVES", "SYNCS"))


def _reads(ins: _Instr) -> set[int]:
    ops = ins.operands[1:] if _writes_first_operand(ins.opcode) and ins.operands else ins.operands
    return set().union(*(_regs(o) for o in ops)) if ops else set()


def _writes(ins: _Instr) -> set[int]:
    if not (_writes_first_operand(ins.opcode) and ins.operands):
        return set()
    return {int(n) for n, _ in _REG.findall(ins.operands[0])}


def _dest(ins: _Instr) -> set[int]:
    m = _REG.search(ins.operands[0]) if ins.operands else None
    if not m:
        return set()
    width = next((w for suffix, w in _WIDTH.items() if ins.opcode.endswith(suffix) or f"{suffix}." in ins.opcode), 1)
    return {int(m.group(1)) + i for i in range(width)}


def loops(instrs: list[_Instr]) -> list[tuple[int, int]]:
    """(first, last) instruction indices of each loop: a branch back to an earlier address."""
    index = {ins.addr: i for i, ins in enumerate(instrs)}
    out = []
    for i, ins in enumerate(instrs):
        if ins.opcode.startswith("BRA") and ins.operands:
            m = _BRANCH_TARGET.search(ins.operands[-1])
            if m:
                target = int(m.group(1), 16)
                if target < ins.addr and target in index:
                    out.append((index[target], i))
    return out


def _is_plain_global_load(opcode: str) -> bool:
    return opcode.startswith("LDG") and not opcode.startswith(("LDGSTS", "LDGDEPBAR"))


def loop_loads(sass: str) -> list[LoopLoad]:
    """Every plain global load in a loop, with its first reader (see the module docstring)."""
    instrs = parse(sass)
    spans = loops(instrs)
    out = []
    for i, ins in enumerate(instrs):
        if not _is_plain_global_load(ins.opcode):
            continue
        inside = [(a, b) for a, b in spans if a <= i <= b]
        if not inside:
            continue
        a, b = min(inside, key=lambda s: s[1] - s[0])
        dest = _dest(ins)
        order = list(range(i + 1, b + 1)) + list(range(a, i))
        found = None
        for step, j in enumerate(order, 1):
            if _reads(instrs[j]) & dest:
                found = (step, j <= i)
                break
            if _writes(instrs[j]) & dest:
                break
        out.append(LoopLoad(ins.addr, ins.opcode, found[0] if found else None, found[1] if found else False))
    return out


def summary(found: list[LoopLoad]) -> dict:
    """{"in_step": [[addr, opcode, distance], ...], "ahead": n}: the loads read in their own iteration (nearest
    reader first), and how many are read in the next."""
    in_step = sorted((ld for ld in found if ld.distance is not None and not ld.ahead), key=lambda ld: ld.distance)
    return {"in_step": [[f"0x{ld.addr:04x}", ld.opcode, ld.distance] for ld in in_step],
            "ahead": sum(ld.ahead for ld in found)}
