"""Latency probes for `kernelbench calibrate` (kernelbench/harness/calibrate.py): how long a dependent launch and an
in-kernel ticket stage take on this GPU, the two fixed costs every decode kernel at small C pays on top of its bytes.

`_launch_probe`: P programs that do nothing but (program 0) add one to a counter. A graph of N of them back to back
times the launch floor: the gap from one kernel's end to the next one's work, with the work itself negligible.
`_ticket_probe`: the same launch plus the split-K tail every fused decode kernel here uses (kernels/linear.py
splitk_store, the MoE gate, the attention front): each program stores a partial and takes an acq_rel ticket; the last
to arrive loads every partial past L1, sums them in program order and adds the sum to the counter, then re-arms the
ticket. Its time less the launch probe's is what one ticketed stage adds to a launch.
Both count what they did, so a calibration checks that every launch of its graph ran before it reports a number.
`_ticket_probe`'s GROUP and LEVELS split the question where a stage's time goes (scripts/latency_probes.py): GROUP
programs share a ticket (one counter per group: how much of the atomic is 132 programs queueing on one address), and
LEVELS 2 makes each group's last program take one more ticket, shared by the group lasts, whose last gathers
everything (a two-level tree: fewer atomics per address, one more round trip on the path).
"""
from __future__ import annotations

import triton
import triton.language as tl

from kernelbench.kernels.common import pdl_enter


@triton.jit
def _launch_probe(count_ptr, PDL: tl.constexpr = False):
    pdl_enter(PDL)
    if tl.program_id(0) == 0:
        tl.store(count_ptr, tl.load(count_ptr) + 1)


@triton.jit
def _ticket_probe(part_ptr, cnt_ptr, count_ptr, P2: tl.constexpr, PDL: tl.constexpr = False,
                  SEM: tl.constexpr = "acq_rel", GATHER: tl.constexpr = True, GROUP: tl.constexpr = 0,
                  LEVELS: tl.constexpr = 1):
    # part (P,) int32 scratch; cnt: int32 tickets, zero between launches (one; with GROUP, one per group and, at
    # LEVELS 2, one more after them); count += 1 + 2 + ... + P. SEM: the tickets' memory order (the kernels' is
    # acq_rel); GATHER False: the last program adds the sum without loading the partials (what the atomic alone
    # costs). GROUP 0: every program takes the one ticket and the last sets count (load + store). GROUP g: programs
    # pid // g share ticket pid // g; at LEVELS 1 each group's last adds its group's sum to count (a relaxed atomic),
    # at LEVELS 2 it takes the top ticket after the groups' and the top's last adds the whole sum.
    pdl_enter(PDL)
    pid = tl.program_id(0)
    n = tl.num_programs(0)
    tl.store(part_ptr + pid, pid + 1)
    tl.debug_barrier()                                              # the partial before the release
    if GROUP == 0:
        if tl.atomic_add(cnt_ptr, 1, sem=SEM, scope="gpu") == n - 1:
            total = _partial_sum(part_ptr, 0, n, P2, GATHER)
            tl.store(count_ptr, tl.load(count_ptr) + total)
            tl.atomic_xchg(cnt_ptr, 0, sem="relaxed", scope="gpu")  # ready for the next launch
    else:
        g = pid // GROUP
        lo = g * GROUP
        size = tl.minimum(n - lo, GROUP)
        if tl.atomic_add(cnt_ptr + g, 1, sem=SEM, scope="gpu") == size - 1:
            tl.atomic_xchg(cnt_ptr + g, 0, sem="relaxed", scope="gpu")
            if LEVELS == 1:
                tl.atomic_add(count_ptr, _partial_sum(part_ptr, lo, size, GROUP, GATHER), sem="relaxed", scope="gpu")
            else:
                groups = tl.cdiv(n, GROUP)
                top = cnt_ptr + groups
                if tl.atomic_add(top, 1, sem=SEM, scope="gpu") == groups - 1:
                    tl.atomic_add(count_ptr, _partial_sum(part_ptr, 0, n, P2, GATHER), sem="relaxed", scope="gpu")
                    tl.atomic_xchg(top, 0, sem="relaxed", scope="gpu")


@triton.jit
def _partial_sum(part_ptr, lo, size, WIDTH: tl.constexpr, GATHER: tl.constexpr):
    """part[lo .. lo + size) summed, loaded past L1 (other programs stored them); without GATHER the same sum from
    its closed form (the partials are pid + 1)."""
    if GATHER:
        offs = tl.arange(0, WIDTH)
        return tl.sum(tl.load(part_ptr + lo + offs, mask=offs < size, other=0, cache_modifier=".cg"), axis=0)
    return size * (2 * lo + size + 1) // 2


def launch_probe(count, programs: int, pdl: bool = False) -> None:
    """One launch of `programs` programs adding 1 to count (a one-element int32 tensor)."""
    _launch_probe[(programs,)](count, PDL=pdl, **({"launch_pdl": True} if pdl else {}), num_warps=4, num_stages=1)


def ticket_probe(part, ticket, count, pdl: bool = False, sem: str = "acq_rel", gather: bool = True, group: int = 0,
                 levels: int = 1) -> None:
    """One launch of part.numel() programs through a ticketed tail adding P (P + 1) / 2 to count; ticket: zeroed
    int32 tickets the launch leaves at zero (one; with `group` g, ticket_count(P, g, levels) of them). `sem`: the
    tickets' memory order; `gather` False: no load of the partials; `group` 0: one ticket for all; `levels` 2: a
    second ticket over the groups' lasts."""
    p = part.numel()
    if group < 0 or group & (group - 1) or levels not in (1, 2) or (levels == 2 and not group):
        raise ValueError(f"ticket_probe: group {group} (0: one ticket, else a power of two) and levels {levels} (1, "
                         f"or 2 with a group)")
    if ticket.numel() < ticket_count(p, group, levels):
        raise ValueError(f"ticket_probe: {ticket.numel()} tickets for {ticket_count(p, group, levels)} needed")
    _ticket_probe[(p,)](part, ticket, count, P2=triton.next_power_of_2(p), PDL=pdl, SEM=sem, GATHER=gather,
                        GROUP=group, LEVELS=levels,
                        **({"launch_pdl": True} if pdl else {}), num_warps=4, num_stages=1)


def ticket_count(programs: int, group: int, levels: int) -> int:
    """Tickets a ticket_probe launch uses: 1 (group 0), one per group, and one more at two levels."""
    if not group:
        return 1
    return triton.cdiv(programs, group) + (levels == 2)
