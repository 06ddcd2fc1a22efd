"""Latency probes for `kernelbench calibrate` (kernelbench/harness/calibrate.py): how long a dependent launch and an
in-kernel ticket stage take on this GPU, the two fixed costs every decode kernel at small C pays on top of its bytes.

`_launch_probe`: P programs that do nothing but (program 0) add one to a counter. A graph of N of them back to back
times the launch floor: the gap from one kernel's end to the next one's work, with the work itself negligible.
`_ticket_probe`: the same launch plus the split-K tail every fused decode kernel here uses (kernels/linear.py
splitk_store, the MoE gate, the attention front): each program stores a partial and takes an acq_rel ticket; the last
to arrive loads every partial past L1, sums them in program order and adds the sum to the counter, then re-arms the
ticket. Its time less the launch probe's is what one ticketed stage adds to a launch.
Both count what they did, so a calibration checks that every launch of its graph ran before it reports a number.
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
                  SEM: tl.constexpr = "acq_rel", GATHER: tl.constexpr = True):
    # part (P,) int32 scratch; cnt: one int32 ticket, zero between launches; count += 1 + 2 + ... + P. SEM: the
    # ticket's memory order (the kernels' is acq_rel); GATHER False: the last program adds the sum without loading
    # the partials (what the atomic alone costs)
    pdl_enter(PDL)
    pid = tl.program_id(0)
    n = tl.num_programs(0)
    tl.store(part_ptr + pid, pid + 1)
    tl.debug_barrier()                                              # the partial before the release
    if tl.atomic_add(cnt_ptr, 1, sem=SEM, scope="gpu") == n - 1:
        if GATHER:
            offs = tl.arange(0, P2)
            total = tl.sum(tl.load(part_ptr + offs, mask=offs < n, other=0, cache_modifier=".cg"), axis=0)
        else:
            total = n * (n + 1) // 2
        tl.store(count_ptr, tl.load(count_ptr) + total)
        tl.atomic_xchg(cnt_ptr, 0, sem="relaxed", scope="gpu")      # ready for the next launch


def launch_probe(count, programs: int, pdl: bool = False) -> None:
    """One launch of `programs` programs adding 1 to count (a one-element int32 tensor)."""
    _launch_probe[(programs,)](count, PDL=pdl, **({"launch_pdl": True} if pdl else {}), num_warps=4, num_stages=1)


def ticket_probe(part, ticket, count, pdl: bool = False, sem: str = "acq_rel", gather: bool = True) -> None:
    """One launch of part.numel() programs through a ticketed tail adding P (P + 1) / 2 to count; ticket: one zeroed
    int32 the launch leaves at zero. `sem`: the ticket's memory order; `gather` False: no load of the partials."""
    p = part.numel()
    _ticket_probe[(p,)](part, ticket, count, P2=triton.next_power_of_2(p), PDL=pdl, SEM=sem, GATHER=gather,
                        **({"launch_pdl": True} if pdl else {}), num_warps=4, num_stages=1)
