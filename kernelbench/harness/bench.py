"""Benchmarking at deployment shapes, shared by `kernelbench bench`, `kernelbench scaling` and the
pytest plugin: which cases to time, the datasheet peaks behind the 'faster than hardware' check, one
result row in the database (through the Store), the rows `kernelbench gate` reads, and freeing the GPU
between cases."""
from __future__ import annotations

import datetime as _dt
import json
from dataclasses import dataclass, field
from typing import Any

import torch

from kernelbench import registry, tuned_configs
from kernelbench.db.values import canonical_json
from kernelbench.harness import timing


def peaks_for(device: str) -> tuple[float, float] | None:
    """The fastest the datasheet allows (any precision), for the 'faster than hardware' check."""
    from kernelbench.harness import devices
    spec = devices.find(device)
    if spec is None:
        return None
    return max(spec.bf16_tflops, spec.fp8_tflops, spec.fp4_tflops), spec.bandwidth_gbps


def parse_where(items) -> dict[str, frozenset[str]]:
    """`--where KEY=V1,V2` filters (repeatable; every KEY must match, any of its values) -> {KEY: {values}}. The
    values are compared with a case's params as text, so `--where M=64 --where kind=csa` works for ints and
    strings alike. A malformed item is a ValueError naming it."""
    out: dict[str, frozenset[str]] = {}
    for item in items or ():
        key, sep, values = item.partition("=")
        key = key.strip()
        vals = frozenset(v.strip() for v in values.split(",") if v.strip())
        if not sep or not key or not vals:
            raise ValueError(f"--where {item!r}: expected KEY=VALUE[,VALUE...], e.g. M=64 or N=256,4096")
        out[key] = out.get(key, frozenset()) | vals
    return out


def describe_where(where: dict[str, frozenset[str]]) -> str:
    """The filters as the command line spells them: `--where M=16,64 --where N=256`."""
    return " ".join(f"--where {k}={','.join(sorted(v))}" for k, v in where.items())


def matches_where(params: dict, where: dict[str, frozenset[str]] | None) -> bool:
    """Whether a case's params pass every --where filter (a filter on a key the case lacks excludes it)."""
    return tuned_configs.key_matches(params, (where or {}).items())


def select_cases(spec, shape_sets: tuple[str, ...], batches: tuple[int, ...], contexts: tuple[int, ...],
                 where: dict[str, frozenset[str]] | None = None) -> list[dict]:
    out = []
    for ss in shape_sets:
        for p in spec.shape_cases(ss):
            if batches and spec.batch(p) not in (None, *batches):
                continue
            if contexts and "ctx" in p and p["ctx"] not in contexts:
                continue
            if not matches_where(p, where):
                continue
            if p not in out:
                out.append(p)
    return out


def record(store, env_id: int, impl, m: timing.Measurement, ceilings, run_tag: str, git: str) -> None:
    from kernelbench.harness import roofline
    pt = roofline.point(m.op, m.impl, m.label, m.flops, m.bytes, ceilings, m.summary.median_us) if ceilings else None
    extra = {"verified": m.verified, "verify_detail": m.verify_detail, "roofline_error": m.roofline_error,
             "notes": m.notes, "sets": m.sets, "rotated_bytes": m.rotated_bytes, "l2_cold": m.l2_cold,
             "launches": m.launches, "mean_us": m.summary.mean_us,
             "ceilings": None if ceilings is None else ceilings.source}
    store.add_bench_results([dict(
        environment_id=env_id, implementation_id=store.impl_id(impl), shape_label=m.label, params=m.params,
        config=m.config, method=m.method, median_us=m.summary.median_us, q1_us=m.summary.q1_us,
        q3_us=m.summary.q3_us, n=m.summary.n, rel_stderr=m.summary.rel_stderr, samples=m.summary.samples,
        flops=m.flops, bytes=m.bytes, gbps=m.gbps, tflops=m.tflops,
        fraction_of_ceiling=None if pt is None else pt.fraction, sm_clock_mhz=m.sm_clock_mhz,
        git_commit=git, run_tag=run_tag, extra=extra)])


def as_row(device: str, m: timing.Measurement, git: str) -> dict:
    return {"device": device, "op": m.op, "impl": m.impl, "label": m.label, "params": m.params, "config": m.config,
            "method": m.method, "median_us": m.summary.median_us, "q1_us": m.summary.q1_us, "q3_us": m.summary.q3_us,
            "n": m.summary.n, "verified": m.verified, "verify_detail": m.verify_detail,
            "roofline_error": m.roofline_error, "l2_cold": m.l2_cold, "git_commit": git}


def free_memory() -> None:
    """Drop what the last case left on the GPU (its inputs, graphs, allocator cache) before the next."""
    import gc
    import torch
    gc.collect()
    torch.cuda.empty_cache()


def write_results(path: str, device: str, git: str, run_tag: str, rows: list) -> None:
    """The --json file of a bench run (what `kernelbench gate` reads)."""
    with open(path, "w") as f:
        json.dump({"device": device, "git_commit": git, "run_tag": run_tag, "results": rows}, f, indent=1)


def bench_work(ops, impl_names, shape_sets, batches, contexts, where=None) -> list[tuple]:
    """(spec, impl, params) of every case a bench run times, in order: ops by name, impls by name (`where`:
    parse_where's filters)."""
    return [(spec, impl, params) for spec in registry.ops(list(ops) or None)
            for impl in sorted(registry.impls(spec.name).values(), key=lambda i: i.name)
            if not impl_names or impl.name in impl_names
            for params in select_cases(spec, shape_sets, batches, contexts, where)]


def measure_trial(measure, spec, impl, params: dict, trial, device: str = "cuda", stored: dict | None = None,
                  row: str = "", **timing_kw) -> tuple[timing.Measurement | None, str]:
    """bench --try: `impl` at `params` with a trial's configs (kernelbench.decoder.trials.Trial), on the inputs the
    plain row timed (measure_impl draws them from the same seed). `measure`(spec, impl, params, **kw) times (a
    BenchRun's). -> (the measurement, how the config got in: "lookup" or "default_config") or (None, why not).

    The trial's pins are applied to the op's tuned-config lookups (tuned_configs.pins_applied, as decode-bench
    --try), so the config that runs is the one the impl would look up, with the pin's keys over it: the row keeps
    that config (`config`), a series of its own in history and gate. One untimed call on one input set (on
    `device`) first shows which lookups of the op the trial answers, and with what; an impl that asks none (its own
    default_config decides, e.g. moe_gate) is timed with the pin's keys over `default_config(params)`; without
    either nothing is timed. A trial without a pin of this op, or whose filters exclude this case, times nothing.
    `stored` (repeated_config's map of this case's rows): a config already run for the case is not timed again;
    otherwise it is noted there as `row`'s."""
    pins = [p for p in trial.pins if p.op == spec.name]
    if not pins:
        return None, f"the trial names no pin of {spec.name}"
    resolved = _trial_lookups(spec, impl, params, trial, device)
    if resolved:
        configs = {canonical_json(r.config): dict(r.config) for r in resolved}
        config = next(iter(configs.values())) if len(configs) == 1 else {"lookups": list(configs.values())}
        how, note, given = "lookup", f"pinned at {len(resolved)} lookup(s) of {spec.name}", None
    else:
        pin = next((p for p in pins if tuned_configs.key_matches(params, p.where)), None)
        if pin is None or impl.default_config is None:
            why = ("its filters exclude this case" if pin is None else
                   f"{impl.name} looks up no config and declares no default_config")
            return None, f"the trial matched no lookup of {spec.name}/{impl.name} here ({why}): not timed"
        config = given = {**impl.default_config(params), **pin.config}
        how, note = "default_config", f"over {impl.name}'s default_config (it looks up no config)"
    same = repeated_config(stored, config, row) if stored is not None else None
    if same is not None:
        return None, f"ran the config of row '{same}': not timed again, stored once"
    with tuned_configs.pins_applied(trial.pins):
        m = measure(spec, impl, params, **({"config": given} if given is not None else {}), **timing_kw)
    m.config = config
    m.notes.append(f"try {trial.text}: {note}")
    return m, how


def repeated_config(seen: dict[str, str], config, shown_as: str) -> str | None:
    """bench --try: the row of this case (`seen`: canonical config -> the row that ran it, plain or trial) that ran
    `config` already, or None (then `config` is noted in `seen` as `shown_as`'s). Two trials that resolve to one
    config (e.g. a pin of what the tuned entry already holds) are one series: the store keeps it once."""
    key = canonical_json(config)
    if key in seen:
        return seen[key]
    seen[key] = shown_as
    return None


def _trial_lookups(spec, impl, params: dict, trial, device: str) -> list:
    """The lookups of its op (tuned_configs.Resolution) that one untimed call of `impl` at `params` (one input set)
    asks and the trial's pins answer."""
    inputs = impl.prepared(spec.make_inputs(params, torch.Generator().manual_seed(0), device, "normal"))
    with tuned_configs.record_resolutions() as seen, tuned_configs.pins_applied(trial.pins), torch.no_grad():
        impl.fn(**inputs)
    del inputs
    return [r for r in seen if r.op == spec.name and r.source == "trial"]


@dataclass
class BenchRun:
    """One bench run on this GPU: where its results go (store, environment, run tag, commit), what they
    are compared with (roofline ceilings, datasheet peaks), and the rows stored so far."""
    store: Any
    env_id: int
    device: str                  # the GPU's name
    git: str
    run_tag: str
    ceilings: Any = None         # roofline.Ceilings, or None when neither a calibration nor a datasheet knows it
    peaks: tuple[float, float] | None = None
    rows: list[dict] = field(default_factory=list)

    @classmethod
    def start(cls, store, run_tag: str | None = None) -> "BenchRun":
        from kernelbench.harness import calibrate, roofline
        from kernelbench.harness.fingerprint import fingerprint, git_commit
        fp = fingerprint("cuda")
        env_id = store.environment_id(fp)
        device = fp["gpu_name"]
        run_tag = run_tag or _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        try:
            ceilings = roofline.ceilings_for(device, calibrate.load_ceilings(store, env_id))
        except ValueError:
            ceilings = None
        return cls(store, env_id, device, git_commit(), run_tag, ceilings, peaks_for(device))

    def measure(self, spec, impl, params, **timing_kw) -> timing.Measurement:
        """Time one case (timing.measure_impl with this GPU's peaks); nothing is stored."""
        return timing.measure_impl(spec, impl, params, peaks=self.peaks, **timing_kw)

    def keep(self, impl, m: timing.Measurement, trial: str | None = None) -> None:
        """Store a measurement (bench_result row) and add it to the run's rows; `trial`: the --try text a trial row
        ran (its JSON row's "trial"; None for a plain row)."""
        record(self.store, self.env_id, impl, m, self.ceilings, self.run_tag, self.git)
        self.rows.append({**as_row(self.device, m, self.git), "trial": trial})

    def roofline_point(self, m: timing.Measurement):
        """Where m stands against the ceilings (roofline.point), or None without ceilings."""
        from kernelbench.harness import roofline
        if not self.ceilings:
            return None
        return roofline.point(m.op, m.impl, m.label, m.flops, m.bytes, self.ceilings, m.summary.median_us)

    def write(self, path: str) -> None:
        write_results(path, self.device, self.git, self.run_tag, self.rows)
