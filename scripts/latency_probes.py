"""Variants of calibrate's latency probes (kernels/probe.py), for the question which part of a ticketed split-K stage
costs what on this GPU: the launch floor at 1, one-per-SM and four-per-SM programs, with and without PDL; the ticket
stage as the kernels take it (acq_rel, the last program gathering every partial), with a release-only ticket (the
classic threadfence-reduction form), without the gather, with a ticket per group of programs and as a two-level
tree (is it the queue on one address?). Every variant's count is checked after its timing
(kernelbench.harness.calibrate.probe_graph_us). Run on the GPU machine:

    python3 scripts/latency_probes.py --json OUT.json
"""
from __future__ import annotations

import argparse
import json

import torch

from kernelbench.harness import timing
from kernelbench.harness.calibrate import probe_graph_us
from kernelbench.kernels.attention import sm_count
from kernelbench.kernels.probe import launch_probe, ticket_count, ticket_probe


def variants(sms: int) -> list[tuple[str, dict]]:
    out = [(f"launch, {p} programs{', PDL' if pdl else ''}", {"kind": "launch", "programs": p, "pdl": pdl})
           for p in (1, sms, 4 * sms) for pdl in (False, True)]
    out += [(f"ticket {sem}{'' if gather else ', no gather'}, {sms} programs", {"kind": "ticket", "programs": sms,
                                                                               "sem": sem, "gather": gather})
            for sem, gather in (("acq_rel", True), ("release", True), ("acq_rel", False), ("relaxed", False))]
    # session 28: how much of a stage is programs queueing on one ticket's address. `group` programs share a ticket
    # (their last adds the group's sum to the count); `levels` 2: the groups' lasts take one more ticket, whose last
    # gathers every partial (a tree: 2 round trips, at most max(group, groups) atomics per address)
    for p in (sms, 4 * sms):
        for group, levels in ((1, 1), (8, 1), (32, 1), (8, 2), (16, 2), (32, 2)):
            if group < p:
                out.append((f"ticket acq_rel, {p} programs, {group} a ticket{', two levels' if levels == 2 else ''}",
                            {"kind": "ticket", "programs": p, "sem": "acq_rel", "gather": True, "group": group,
                             "levels": levels}))
        if p != sms:
            out.append((f"ticket acq_rel, {p} programs", {"kind": "ticket", "programs": p, "sem": "acq_rel",
                                                           "gather": True}))
    return out


def run(max_time_s: float) -> list[dict]:
    dev = timing.require_cuda()
    rows = []
    for name, v in variants(sm_count(dev)):
        count = torch.zeros(1, dtype=torch.int32, device=dev)
        p = v["programs"]
        if v["kind"] == "launch":
            s = probe_graph_us(lambda: launch_probe(count, p, v["pdl"]), count, 1, max_time_s)
        else:
            part = torch.zeros(p, dtype=torch.int32, device=dev)
            tree = {"group": v.get("group", 0), "levels": v.get("levels", 1)}
            ticket = torch.zeros(ticket_count(p, **tree), dtype=torch.int32, device=dev)
            s = probe_graph_us(lambda: ticket_probe(part, ticket, count, sem=v["sem"], gather=v["gather"], **tree),
                               count, p * (p + 1) // 2, max_time_s)
        rows.append({"variant": name, **v, "median_us": s.median_us, "q1_us": s.q1_us, "q3_us": s.q3_us, "n": s.n})
        print(f"{name}: {s.median_us:.3f} us (IQR {s.q1_us:.3f} .. {s.q3_us:.3f}, n {s.n})", flush=True)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", help="write the rows here")
    ap.add_argument("--max-time", type=float, default=0.3, help="seconds of timing per variant at most")
    args = ap.parse_args()
    rows = run(args.max_time)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
