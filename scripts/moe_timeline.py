"""Where moe_layer's (or moe_routed's) time goes inside its launches: the in-kernel timeline (kernels/trace.py) of
graph-replayed calls.

Bench's rows give a call's median; this gives, for the same graph (back-to-back calls cycling over input sets that
keep the L2 cold, as `kernelbench bench` times them), each launch's programs: when they started, passed their PDL
wait, finished their GEMM work and ended, relative to the call's first gate program, by kind (gate scoring / x
quantization programs; the grouped launches' shared-expert items, routed items with work, routed items past the
active count). Medians over every call of every replay, so one row reads "a typical call".

    python scripts/moe_timeline.py --device cuda [--op moe_routed] [--tokens 1,16,64] [--hash] [--replays 20]
        [--json OUT]

The params are the op's flash-tp8 case (kernelbench/ops/moe.py) at the asked token count. --op moe_routed times the
decode step's form of the MoE: fp32 partial out and, with score routing, the TP rank's slice of the shared expert
inside the routed launches (the set's "shared" case), where moe_layer has the whole shared expert.

Times are %globaltimer (one clock for all SMs); the script reports the finest step it saw between distinct values,
so a reader knows the resolution. Per-program busy times are also given in SM cycles (%clock64, same SM).
"""
from __future__ import annotations

import argparse
import json
import statistics

import torch

import kernelbench.ops  # noqa: F401  (registers the ops)
from kernelbench import registry, tuned_configs
from kernelbench.harness.timing import capture_graph, l2_bytes, make_sets
from kernelbench.kernels import trace

OPS = ("moe_layer", "moe_routed")
KIND_NAMES = {"moe gate (one launch)": {0: "scoring", 1: "x quant"},
              "moe W1/W3": {0: "shared", 1: "routed", 2: "idle"},
              "moe W2": {0: "shared", 1: "routed", 2: "idle"}}
F = trace.FIELDS
TRACE_ROWS = 1 << 20        # 128 MiB of marks: (warm-up + captured calls) x ~8k programs a call at 64 tokens


def _q(vals: list[float]) -> dict:
    if not vals:
        return {}
    s = sorted(vals)
    return {"min": s[0], "med": statistics.median(s), "max": s[-1]}


def _calls(launches: list[dict], per_call: int) -> list[list[dict]]:
    return [launches[i:i + per_call] for i in range(0, len(launches) - per_call + 1, per_call)]


def summarise(snapshots: list[list[dict]], per_call: int) -> dict:
    """snapshots: per replay, the traced launches in launch order (per_call of them a call). -> per launch label and
    kind: medians over calls of (first / median / last start, released, finish, end) in us from the call's first
    mark, program counts and busy cycles; the call period (next call's start - this one's)."""
    agg: dict = {}
    periods, steps = [], set()
    for launches in snapshots:
        calls = _calls(launches, per_call)
        origins = []
        for call in calls:
            starts = torch.cat([L["rows"][:, F["ns_start"]] for L in call])
            origin = int(starts[starts >= 0].min())
            origins.append(origin)
            for L in call:
                rows = L["rows"]
                names = KIND_NAMES.get(L["label"], {})
                vals = torch.unique(rows[:, :4][rows[:, :4] >= 0])    # the timer's finest step seen
                if len(vals) > 1:
                    steps.add(int((vals[1:] - vals[:-1]).min()))
                for kind in sorted(set(int(k) for k in rows[:, F["kind"]].tolist())):
                    sel = rows[rows[:, F["kind"]] == kind]
                    key = (L["label"], names.get(kind, str(kind)))
                    a = agg.setdefault(key, {"programs": [], **{m: {"first": [], "med": [], "last": []}
                                                                   for m in trace.MARKS}, "busy_cycles": [],
                                             "wait_us": [], "unreached": 0, "steps": {}})
                    a["programs"].append(len(sel))
                    for m in trace.MARKS:
                        col = sel[:, F[f"ns_{m}"]]
                        ok = col[col >= 0]
                        a["unreached"] += int((col < 0).sum())
                        if len(ok):
                            us = [(int(v) - origin) / 1e3 for v in ok.tolist()]
                            a[m]["first"].append(min(us))
                            a[m]["med"].append(statistics.median(us))
                            a[m]["last"].append(max(us))
                    for i in range(trace.STEPS):         # sub-step marks: the latest program's of this kind
                        col = sel[:, F[f"ns_step{i}"]]
                        if (col >= 0).any():
                            a["steps"].setdefault(i, []).append((int(col[col >= 0].max()) - origin) / 1e3)
                    done = (sel[:, F["clk_end"]] >= 0) & (sel[:, F["clk_start"]] >= 0)
                    a["busy_cycles"] += (sel[done, F["clk_end"]] - sel[done, F["clk_released"]]).tolist()
                    a["wait_us"] += ((sel[done, F["ns_released"]] - sel[done, F["ns_start"]]) / 1e3).tolist()
        periods += [(b - a) / 1e3 for a, b in zip(origins, origins[1:])]
    out = {"call_period_us": _q(periods), "timer_step_ns": min(steps) if steps else None, "launches": []}
    for (label, kind), a in agg.items():
        row = {"launch": label, "kind": kind, "programs": statistics.median(a["programs"]),
               "unreached_marks": a["unreached"], "busy_cycles": _q(a["busy_cycles"]), "wait_us": _q(a["wait_us"])}
        for m in trace.MARKS:
            row[m] = {k: statistics.median(v) for k, v in a[m].items() if v}
        row["steps"] = {i: statistics.median(v) for i, v in sorted(a["steps"].items())}
        out["launches"].append(row)
    return out


def flash_case(spec, tokens: int, hashed: bool) -> dict:
    """The op's flash-tp8 case with this routing (the shared-expert slice's, where the set has one: the step's form)
    at `tokens` tokens."""
    cases = [c for c in spec.shape_cases("flash-tp8") if c["hash"] == hashed]
    return {**max(cases, key=lambda c: bool(c.get("shared"))), "T": tokens}


def run_case(tokens: int, hashed: bool, replays: int, device, launches_per_graph: int,
             pins: dict | None = None, op: str = "moe_layer") -> dict:
    spec = registry.get_op(op)
    impl = registry.get_impl(op, "triton")
    params = flash_case(spec, tokens, hashed)
    sets, _, cold = make_sets(spec, params, device, 0, l2_bytes(device), max_sets=64)
    sets = [impl.prepared(s) for s in sets]
    calls = [lambda s=s: impl.fn(**s) for s in sets]
    n = max(launches_per_graph, len(calls))
    # pins over the config the op's lookup finds (a tuned entry or the default), as bench / decode-bench --try
    pinned = [tuned_configs.Pin(op, pins, over="lookup")] if pins else []
    # the recording's arena is made by the first warm-up call, outside the capture
    with tuned_configs.pins_applied(pinned), trace.recording(TRACE_ROWS) as rec:
        graph, _ = capture_graph(calls, n)                    # a warm-up call per set, then n captured
        per_call = rec.keep_last_calls(len(calls) + n, n)
        snaps = []
        for _ in range(replays + 1):
            rec.reset()
            torch.cuda.synchronize()
            graph.replay()
            torch.cuda.synchronize()
            snaps.append(rec.snapshot())
    summary = summarise(snaps[1:], per_call)     # the first replay warms what a graph's first replay warms
    return {"op": op, "params": params, "pins": pins or {}, "l2_cold": cold, "calls_per_graph": n,
            "traced_launches_per_call": per_call, "replays": replays, **summary}


def print_case(res: dict) -> None:
    p = res["params"]
    pins = f" {json.dumps(res['pins'])}" if res["pins"] else ""
    shared = f" shared Fs={p['Fs']}" if p.get("shared") else ""
    print(f"\n{res['op']} T={p['T']} {'hash' if p['hash'] else 'score'}{shared}{pins}: call period "
          f"{res['call_period_us'].get('med', float('nan')):.2f} us (median over {res['replays']} replays x "
          f"{res['calls_per_graph']} calls; L2 cold {res['l2_cold']}), timer step {res['timer_step_ns']} ns")
    print(f"{'launch':24} {'kind':8} {'progs':>5} | {'start first/med/last':>22} | {'released f/m/l':>20} | "
          f"{'finish f/m/l':>20} | {'end f/m/l':>20} | busy kcyc med")
    for r in res["launches"]:
        def fml(m):
            d = r.get(m) or {}
            return "/".join(f"{d[k]:6.2f}" if k in d else "   -  " for k in ("first", "med", "last"))
        busy = r["busy_cycles"].get("med")
        print(f"{r['launch']:24} {r['kind']:8} {r['programs']:5.0f} | {fml('start'):>22} | {fml('released'):>20} | "
              f"{fml('finish'):>20} | {fml('end'):>20} | {busy / 1e3 if busy is not None else float('nan'):.1f}")
        if r["steps"]:
            print(f"{'':24} {'':8} {'':5}   sub-step marks, latest program (us): "
                  + ", ".join(f"{i}: {v:.2f}" for i, v in r["steps"].items()))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--op", default="moe_layer", choices=OPS,
                    help="moe_routed: the decode step's form (fp32 partial, the TP8 slice of the shared expert)")
    ap.add_argument("--tokens", default="1,16,64")
    ap.add_argument("--hash", action="store_true", help="also the hash-routed layer at each token count")
    ap.add_argument("--replays", type=int, default=20)
    ap.add_argument("--calls", type=int, default=32, help="calls per captured graph (bench: 32 or the set count)")
    ap.add_argument("--pin", action="append", default=[], metavar="JSON",
                    help="also each case with these config keys over the config the op's lookup finds, e.g. "
                         "'{\"ROUTE_SORT\": \"slots\"}' (repeatable: one run per pin)")
    ap.add_argument("--json")
    a = ap.parse_args()
    dev = torch.device(a.device)
    if dev.type != "cuda" or not torch.cuda.is_available():
        raise SystemExit("moe_timeline: needs a CUDA GPU (the marks are %globaltimer reads in compiled kernels)")
    try:
        pins = [None] + [json.loads(p) for p in a.pin]
    except json.JSONDecodeError as e:
        raise SystemExit(f"moe_timeline: --pin is not a JSON object: {e}") from None
    results = []
    for t in (int(v) for v in a.tokens.split(",")):
        for hashed in ((False, True) if a.hash else (False,)):
            for pin in pins:
                res = run_case(t, hashed, a.replays, dev, a.calls, pin, a.op)
                print_case(res)
                results.append(res)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(dev), "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
