"""Time moe_experts / moe_layer / moe_gate configs (impl "triton") beside the previous choices (--baselines, default
triton_v3; triton_v1's default with --v1), on the same rotating input sets (drawn once per shape: drawing 400 MB of experts
per config would dominate). GPU only.

    python3 scripts/moe_sweep.py [--op moe_experts] [--batch 64 16 1] [--warm 12] [--json out.json] [--pin best.json]
    python3 scripts/moe_sweep.py --cases moe_experts:64 moe_layer:64 ...
Prints one line per (C, impl, config): median us, written to --json as it goes. --warm N first compiles every
trial in N worker processes (the Triton cache is shared by file), so the timing loop does not compile serially.
--pin writes the fastest `triton` config per op and C ({"moe_experts:64": {...}}) for KERNELBENCH_PIN_CONFIG."""
from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import time

import torch

from kernelbench import registry
from kernelbench.harness import timing
from kernelbench.config import get_shape_set

# C class -> config deltas over the `triton` default (the default itself and triton_v2 are always timed).
# The default loads the scale words + x scales a K block ahead (SCALES "ahead"); BN 128 halves the per-byte loop
# overhead (4 warps: one warpgroup, two m64 wgmma per dot); stages 4: one more weight block in flight; 8 warps at
# BN 128 (sm_90 only: it needs a stack frame on sm_120); EPILOGUE "swiglu": the up pass (no K split, BN 128) writes
# the act-quantized SwiGLU output itself (no fp32 partials, no _swiglu_quant_kernel launch).
SWEEPS = {
    "r1": {     # mid-session call 1 (2026-12-01, docs/perf/moe.md)
        "small": [dict(BN_UP=128, BN_DOWN=128), dict(BN_UP=128, BN_DOWN=128, SPLIT_UP=16, SPLIT_DOWN=8),
                  dict(SPLIT_UP=4, SPLIT_DOWN=2)],
        "mid": [dict(BN_UP=128, BN_DOWN=128), dict(BN_UP=128, BN_DOWN=128, SPLIT_UP=4, SPLIT_DOWN=2),
                dict(num_stages=4)],
        "large": [dict(BN_UP=128, BN_DOWN=128), dict(BN_UP=128, BN_DOWN=64), dict(num_stages=4),
                  dict(BN_UP=128, BN_DOWN=128, num_warps=8), dict(BN_UP=128, BN_DOWN=128, num_stages=4),
                  dict(BN_UP=128, BN_DOWN=128, EPILOGUE="swiglu")],
        "layer": [dict(SHARED_ITEMS="one"), dict(BN_UP=128, BN_DOWN=128, EPILOGUE="swiglu")],
    },
    "r2": {     # call 2: register caps (MAXNREG_DOWN 80: 6 blocks of 4 warps per SM; UP 96 spills 16 B on sm_90)
        "small": [dict(MAXNREG_DOWN=80)],
        "mid": [dict(MAXNREG_DOWN=80), dict(SPLIT_UP=1, SPLIT_DOWN=1), dict(SPLIT_UP=4, SPLIT_DOWN=2)],
        "large": [dict(MAXNREG_DOWN=80), dict(MAXNREG_DOWN=80, MAXNREG_UP=96),
                  dict(BN_UP=128, BN_DOWN=64, EPILOGUE="swiglu", MAXNREG_DOWN=80)],
        "layer": [dict(MAXNREG_DOWN=80)],
    },
    "r3": {     # session 5 (moe4): r2's deltas; moe_layer / moe_gate at C=1 time the fused gate (default) vs triton_v3
        "small": [], "mid": [dict(MAXNREG_DOWN=80), dict(SPLIT_UP=1, SPLIT_DOWN=1), dict(SPLIT_UP=4, SPLIT_DOWN=2),
                             dict(SPLIT_UP=2, SPLIT_DOWN=2)],
        "large": [dict(MAXNREG_DOWN=80), dict(MAXNREG_DOWN=80, MAXNREG_UP=96),
                  dict(BN_UP=128, BN_DOWN=64, EPILOGUE="swiglu", MAXNREG_DOWN=80), dict(X_ONCE=True),
                  dict(SPLIT_DOWN=2)],
        "layer": [dict(MAXNREG_DOWN=80)],
        "layer_mid": [dict(MAXNREG_DOWN=80), dict(GATE="fused")],    # the one-launch gate at C=16 too
        "gate": [dict(GATE="fused")],                                 # moe_gate: the same at C > 4
        # C=1 with the shared expert: 2 active items x 32 x 8 up (64 x 4 down) programs at 3 resident per SM (sm_90
        # static: 168 / 150 registers) = 1.3 waves. FIN_TOKENS 8: the down kernel 150 -> 128 registers (4 per SM);
        # fewer K splits: one wave of longer programs (SPLIT_UP 2: up 128 registers; SPLIT_DOWN 2: down 95)
        "layer_small": [dict(FIN_TOKENS=8), dict(SPLIT_UP=4, SPLIT_DOWN=2, FIN_TOKENS=8),
                        dict(SPLIT_UP=8, SPLIT_DOWN=2, FIN_TOKENS=8), dict(SPLIT_UP=4, SPLIT_DOWN=4, FIN_TOKENS=8),
                        dict(SPLIT_UP=2, SPLIT_DOWN=2, FIN_TOKENS=8), dict(FIN_TOKENS=8, ITEM_TABLE=True),
                        dict(SPLIT_UP=4, SPLIT_DOWN=2, FIN_TOKENS=8, ITEM_TABLE=True)],
    },
    "r4": {     # session 9: slot tiles of 8 (BM 8; the shared expert keeps its own token tile, BM_SHARED) and BDIAG (two
        # scale groups per dot against block-diagonal x tiles: 4 instead of 8 tensor-core waits per K block of W1 + W3)
        "small": [dict(BM=8), dict(BDIAG=True), dict(BDIAG=True, BM=8)],
        "mid": [dict(BM=8), dict(BDIAG=True), dict(BDIAG=True, BM=8)],
        "large": [dict(BM=8), dict(BDIAG=True), dict(BDIAG=True, BM=8)],
        "layer": [dict(BM=8, BM_SHARED=16), dict(BM=8, BM_SHARED=32), dict(BDIAG=True),
                  dict(BDIAG=True, BM=8, BM_SHARED=16)],
        "layer_mid": [dict(BM=8, BM_SHARED=16), dict(BDIAG=True), dict(BDIAG=True, BM=8, BM_SHARED=16)],
        "layer_small": [dict(BM=8), dict(BDIAG=True), dict(BDIAG=True, BM=8)],
    },
    "r5": {     # session 9, call 3: around the new default (BDIAG, BM 8, BM_SHARED 16): splits, register caps, the item table
        "small": [dict(SPLIT_UP=4, SPLIT_DOWN=2), dict(ITEM_TABLE=True)],
        "mid": [dict(SPLIT_UP=2, SPLIT_DOWN=1), dict(SPLIT_UP=2, SPLIT_DOWN=2)],
        "large": [dict(SPLIT_DOWN=2), dict(MAXNREG_DOWN=80), dict(MAXNREG_UP=128)],
        "layer": [dict(SPLIT_DOWN=2), dict(MAXNREG_UP=128), dict(BM_SHARED=32), dict(SHARED_ITEMS="one")],
        "layer_mid": [dict(SPLIT_UP=4, SPLIT_DOWN=2), dict(SPLIT_UP=1, SPLIT_DOWN=1), dict(SPLIT_UP=2, SPLIT_DOWN=2)],
        "layer_small": [dict(SPLIT_UP=8, SPLIT_DOWN=4), dict(SPLIT_UP=8, SPLIT_DOWN=2), dict(ITEM_TABLE=True),
                        dict(BM_SHARED=8)],
    },
    "r6": {     # session 9, call 4: K splits at C=64 around the new default (finer programs against the wave tail)
        "large": [dict(SPLIT_UP=2), dict(SPLIT_UP=2, SPLIT_DOWN=2)],
        "layer": [dict(SPLIT_UP=2), dict(SPLIT_UP=2, SPLIT_DOWN=2), dict(BN_DOWN=128)],
    },
    "r7": {     # session 11: the one-launch gate's warps per program (its last program's top-k and slot sort)
        "layer_small": [dict(GATE_WARPS=1), dict(GATE_WARPS=2)], "gate_small": [dict(GATE_WARPS=1), dict(GATE_WARPS=2)],
        "small": [dict(GATE_WARPS=1), dict(GATE_WARPS=2)],
    },
    "r8": {     # session 12: the routing launch after the gate GEMM at C > 4 (GATE "gemm"): the slot sort in one chunk
        # (ROUTE_CH 512: at C = 64 the 384 slots are 3 chunks of 128, each a key-load round trip in both passes) and
        # its warps. Call 1 also timed the gate GEMM's K splits through an option since removed (GATE_SPLIT 8 / 32:
        # data/h200-2026-12-02-session12/call1); that GEMM takes bf16_linear's config at (M = T, N = E, K = D), so a
        # bf16_linear pin or tuned entry sets it
        "layer": [dict(ROUTE_CH=512), dict(ROUTE_CH=512, ROUTE_WARPS=8), dict(ROUTE_WARPS=8)],
        "layer_mid": [dict(ROUTE_WARPS=8), dict(ROUTE_WARPS=2)],
    },
    "r9": {     # session 12: K splits of the routed launches as the step runs them (moe_routed, the shared expert
        # beside) at C = 16 / 64: more, shorter programs against the last partial wave of the up launch (C = 64: 32
        # items x 32 N tiles x 2 splits at 3-4 resident programs per SM)
        "large": [dict(SPLIT_UP=4), dict(SPLIT_UP=4, SPLIT_DOWN=2), dict(SPLIT_DOWN=2), dict(SPLIT_UP=1)],
        "mid": [dict(SPLIT_UP=8, SPLIT_DOWN=4), dict(SPLIT_UP=2, SPLIT_DOWN=2), dict(SPLIT_UP=4, SPLIT_DOWN=4),
                dict(SPLIT_UP=8, SPLIT_DOWN=2)],
    },
    "r10": {    # next (not run yet): r9's finding for moe_layer (the shared expert fused) at C = 64. Under its 80-register
        # down cap (4, 1) compiles clean for sm_120; (4, 2) spills 16 B there (measure only, not shippable as is)
        "layer": [dict(SPLIT_UP=4), dict(SPLIT_UP=4, SPLIT_DOWN=2)],
    },
}
SWEEP = dict(SWEEPS["r2"])     # the table in use (--sweep); a copy: main() refills it


def _klass(op: str, T: int) -> str:
    if op == "moe_layer":           # per-C rows where the table has them
        k = "layer_small" if T <= 4 else ("layer_mid" if T <= 32 else "layer")
        return k if k in SWEEP else "layer"
    if op == "moe_gate":
        return "gate" if T > 4 else "gate_small"           # at C <= 4 the one-launch gate is the default
    return "small" if T <= 4 else ("mid" if T <= 32 else "large")


def _cases(op: str, shapes: str, batch: list[int]):
    spec = registry.get_op(op)
    return spec, [p for p in spec.shape_cases(get_shape_set(shapes)) if p["T"] in batch and not p.get("hash")]


BASELINES = ["triton_v3"]     # previous impls timed first (--baselines); the first one is the rel_fro reference


def _trials(op: str, params: dict, defaults_only: bool, v1: bool) -> list[tuple[str, dict | None]]:
    new = registry.get_impl(op, "triton")
    base = new.default_config(params)
    old = [n for n in (["triton_v1"] if v1 else []) + BASELINES if n in registry.impls(op)]
    if op == "moe_gate" and not old:
        old = ["triton_v1"]                                       # the gate's previous impl (GEMM + top-k)
    out = [(n, None) for n in old] + [("triton", None)]
    if not defaults_only:
        out += [("triton", {**base, **c}) for c in SWEEP.get(_klass(op, params["T"]), [])]
    return out


def _warm_job(job) -> str:
    """One worker: draw one shape's inputs (small values, real shapes) and call each trial once: compiles."""
    op, shapes, T, trials = job
    registry.load_builtin()
    spec, cases = _cases(op, shapes, [T])
    params = cases[0]
    inputs = spec.make_inputs(params, torch.Generator().manual_seed(0), torch.device("cuda"), "normal")
    msgs = []
    for name, cfg in trials:
        impl = registry.get_impl(op, name)
        t0 = time.time()
        try:
            impl.fn(**impl.prepared(inputs), **({"config": cfg} if cfg else {}))
            torch.cuda.synchronize()
            msgs.append(f"warm T={T} {name} {cfg or 'default'}: {time.time() - t0:.1f} s")
        except Exception as e:  # noqa: BLE001 - the timing loop reports it again
            msgs.append(f"warm T={T} {name} {cfg}: {type(e).__name__}: {str(e)[:200]}")
    return "\n".join(msgs)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--op", nargs="+", default=["moe_experts"], help="ops, timed in this order")
    ap.add_argument("--cases", nargs="*", default=[], help="OP:C pairs timed in this order (instead of --op/--batch)")
    ap.add_argument("--batch", type=int, nargs="*", default=[64, 16, 1])
    ap.add_argument("--shapes", default="flash-tp8")
    ap.add_argument("--max-time", type=float, default=0.3)
    ap.add_argument("--json", default="")
    ap.add_argument("--pin", default="")
    ap.add_argument("--warm", type=int, default=0, help="compile every trial first in N worker processes")
    ap.add_argument("--v1", action="store_true", help="time triton_v1's default too")
    ap.add_argument("--defaults-only", action="store_true")
    ap.add_argument("--sweep", default="r2", choices=sorted(SWEEPS), help="which table of config deltas")
    ap.add_argument("--baselines", nargs="*", default=BASELINES, help="previous impls timed before the default")
    a = ap.parse_args()
    BASELINES[:] = a.baselines
    SWEEP.clear()
    SWEEP.update(SWEEPS[a.sweep])
    registry.load_builtin()
    todo = []                                                       # (op, spec, params), most important first
    for op, T in ([(c.split(":")[0], int(c.split(":")[1])) for c in a.cases] or
                  [(op, T) for op in a.op for T in a.batch]):
        spec, cases = _cases(op, a.shapes, [T])
        todo += [(op, spec, p) for p in cases]
    if a.warm:
        jobs = []
        for op, _, p in todo:
            trials = _trials(op, p, a.defaults_only, a.v1)
            jobs += [(op, a.shapes, p["T"], trials[i:i + 2]) for i in range(0, len(trials), 2)]
        t0 = time.time()
        with mp.get_context("spawn").Pool(min(a.warm, len(jobs))) as pool:
            for msg in pool.imap_unordered(_warm_job, jobs):
                print(msg, flush=True)
        print(f"warm-up: {len(jobs)} jobs in {time.time() - t0:.1f} s", flush=True)
    rows, best = [], {}
    for op, spec, params in todo:
        T = params["T"]
        sets, _, _ = timing.make_sets(spec, params, torch.device("cuda"), 0, timing.l2_bytes(), max_sets=16,
                                      distinct=2)
        ref, prepared = None, {}                   # the load-time layout, made once per prepare function
        for name, cfg in _trials(op, params, a.defaults_only, a.v1):
            impl = registry.get_impl(op, name)
            kw = {"config": cfg} if cfg else {}
            if impl.prepare not in prepared:
                prepared[impl.prepare] = [impl.prepared(s) for s in sets]
            use = prepared[impl.prepare]
            calls = [(lambda s=s: impl.fn(**s, **kw)) for s in use]
            t0 = time.time()
            try:
                out = calls[0]()
                out = (out[0] if isinstance(out, tuple) else out).float()
                ref = out if ref is None else ref          # the first impl's output on set 0 (triton_v2 / v1)
                err = float((out - ref).norm() / ref.norm().clamp_min(1e-30))
                torch.cuda.synchronize()
                summ, _, _ = timing.time_graph(calls, max_time_s=a.max_time)
                us = summ.median_us
            except Exception as e:  # noqa: BLE001 - report and go on
                print(f"{op} T={T} {name} {cfg}: {type(e).__name__}: {str(e)[:300]}", flush=True)
                continue
            del use, calls
            shown = cfg or (impl.default_config(params) if impl.default_config else {})     # triton_v1 gates: none
            print(f"{op} T={T:3d} {name:9s} {us:9.2f} us  rel_fro vs first {err:.1e}  ({time.time() - t0:.1f} s)  "
                  f"{'' if cfg else 'default '}{shown}", flush=True)
            rows.append({"op": op, "T": T, "impl": name, "config": shown, "default": cfg is None,
                         "median_us": us, "rel_fro_vs_first": err, "iqr_us": summ.iqr_us, "n": summ.n})
            tag = f"{op}:{T}"
            if name == "triton" and (tag not in best or us < best[tag][0]):
                best[tag] = (us, shown)
            if a.json:
                with open(a.json, "w") as f:
                    json.dump({"device": torch.cuda.get_device_name(), "rows": rows}, f, indent=1)
            if a.pin:
                with open(a.pin, "w") as f:
                    json.dump({k: v[1] for k, v in best.items()}, f)
        del sets, prepared
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
