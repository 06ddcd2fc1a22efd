"""The autotuner: every config of a Triton implementation's space, for one op at one shape.

Per (implementation, params):
1. Space: `Impl.configs(params)`. Exhaustive when it has at most `max_trials` configs; otherwise a local
   search in two phases, `max_trials` configs in all:
   - first the default config (so the tuned result is never worse than what runs untuned), for every value
     of a categorical option (a code path, e.g. PATH or DECODE) the config nearest the default with it
     (verify_paths.covering_configs: every path competes), the default's neighbours (configs of the space
     that differ from it in one option) for up to half of the remaining places, and a deterministic random
     sample (seeded by the shape) for the rest, leaving a quarter of `max_trials` (refine_slots) to
   - the search around the best valid config so far: rounds of its neighbours not yet tried (a few a round),
     from a neighbour that beats it as soon as one does, until those places or the time budget are spent or
     every neighbour of the best has been tried (hill climbing). A random sample of a large space rarely
     draws the configs one option away from a good one (session 41: 24 of attention_front's 577 at 64
     tokens, none with the default's tile and wider row blocks).
   Every trial is stored, so a later run with a larger `max_trials` only adds configs.
2. Static check for sm_120 (the users' GPU), no GPU needed (inspector.py): a config that does not
   compile, needs more than 101,376 bytes of shared memory or spills is recorded invalid with the
   compiler's reason (invalid_compile, invalid_smem, invalid_spill) and never run.
3. Trial on this device: one call checked against the reference (invalid_verify, with the error
   statistics), then timed by `timer` (CUDA-graph replay over rotating inputs on a GPU; tests inject
   a fake). With `isolate=True` trials run in a worker process: a config that crashes the process or
   runs past `trial_timeout_s` is recorded (crash, timeout) and the worker restarted.
4. Every trial is stored (db tune_trial, unique per environment, implementation, shape key and
   config): an interrupted tune resumes and skips what it finished.
5. The best `top_k` valid configs are re-timed interleaved (round-robin, `rounds` times) and the
   lowest median wins: one lucky screening sample does not pick the winner.
6. The choice is stored (tune_choice) and exported by `export()` to kernelbench/tuned/v1.json under
   the key the kernel itself passes to `kernelbench.tuned_configs.lookup` (observed on a call).
"""
from __future__ import annotations

import datetime as _dt
import importlib
import json
import multiprocessing as mp
import os
import random
import statistics
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import torch

from kernelbench import registry, tuned_configs
from kernelbench.db.values import canonical_json

INVALID = ("invalid_compile", "invalid_smem", "invalid_spill", "invalid_verify", "crash", "timeout")
Timer = Callable[[list, dict], list]   # (calls over rotating input sets, config) -> samples in us


@dataclass
class Trial:
    config: dict
    status: str
    reason: str = ""
    median_us: float | None = None
    samples: list = field(default_factory=list)
    resumed: bool = False


@dataclass
class TuneResult:
    op: str
    impl: str
    params: dict
    key: dict
    device: str
    trials: list[Trial]
    chosen: dict | None
    chosen_us: float | None
    retimed: dict = field(default_factory=dict)   # canonical config -> retimed samples
    untried: int = 0
    exported_to: str = ""       # the tuned JSON tune_run merged the choice into ("" when it was not exported)
    export_refused: str = ""    # why export() refused the choice (e.g. no passing verify of its path); "" if it did not


def canon(config: dict) -> str:
    return canonical_json(config)


# --- timers -------------------------------------------------------------------------------------

def gpu_timer(calls: list, config: dict, max_time_s: float = 0.25) -> list:
    """CUDA-graph replay over the rotating input sets (timing.time_graph); samples in us."""
    from kernelbench.harness import timing
    summary, _, _ = timing.time_graph(calls, max_time_s=max_time_s, target_rse=0.02, min_samples=10)
    return summary.samples


def cpu_timer(calls: list, config: dict, reps: int = 3) -> list:
    """Wall-clock of interpreter calls (`tune --interpret`): exercises the tuner's paths on a CPU;
    the numbers say nothing about a GPU and are never exported unless asked."""
    out = []
    for _ in range(reps):
        t0 = time.perf_counter()
        calls[0]()
        out.append((time.perf_counter() - t0) * 1e6)
    return out


def resolve(ref: str) -> Callable:
    """'package.module:attr' or '/path/file.py:attr' -> the object (timers for isolated workers)."""
    where, _, attr = ref.rpartition(":")
    if where.endswith(".py"):
        registry.load_module(where)
        import sys
        mod = next(m for n, m in sys.modules.items() if getattr(m, "__file__", None)
                   and Path(m.__file__).resolve() == Path(where).resolve())
    else:
        mod = importlib.import_module(where)
    return getattr(mod, attr)


# --- running one config --------------------------------------------------------------------------

def cuda_fault(e: BaseException) -> bool:
    """An error after which the process's CUDA context is unusable (illegal address, launch failure)."""
    text = str(e)
    return "CUDA error" in text or "illegal memory access" in text or "unspecified launch failure" in text


class Bench:
    """Inputs of one (op, params) on one device, the reference outputs, and trial execution."""

    def __init__(self, spec: registry.OpSpec, impl: registry.Impl, params: dict, device: str, seed: int = 0,
                 max_sets: int = 64):
        from kernelbench.harness import timing
        self.spec, self.impl, self.params = spec, impl, params
        if device == "cuda":
            self.sets, _, _ = timing.make_sets(spec, params, torch.device("cuda"), seed,
                                               timing.l2_bytes(torch.device("cuda")), max_sets=max_sets)
        else:
            self.sets = [spec.make_inputs(params, torch.Generator().manual_seed(seed), device, "normal")]
        self.check_inputs = timing.clone(self.sets[0])       # official layout (the reference recheck)
        self.sets = [impl.prepared(s) for s in self.sets]      # the load-time weight layout, untimed

    def key(self) -> dict:
        """The key the kernel passes to tuned_configs.lookup (observed on one default call), else params."""
        from kernelbench.harness import timing
        with tuned_configs.observe_lookups() as seen:
            self.impl.fn(**self.impl.prepared(timing.clone(self.check_inputs)))
        mine = [k for op, k in seen if op == self.spec.name]
        return mine[0] if mine else dict(self.params)

    def verify(self, config: dict) -> tuple[bool, str]:
        from kernelbench.harness import timing
        inputs = timing.clone(self.check_inputs)
        outs = timing.as_outputs(self.spec, self.impl.fn(**self.impl.prepared(inputs), config=config), inputs)
        return timing.recheck(self.spec, self.params, outs, timing.clone(self.check_inputs))

    def calls(self, config: dict) -> list:
        return [(lambda s=s: self.impl.fn(**s, config=config)) for s in self.sets]

    def trial(self, config: dict, timer: Timer) -> Trial:
        try:
            ok, detail = self.verify(config)
        except Exception as e:  # noqa: BLE001 - a config that raises is invalid, with the reason
            if cuda_fault(e):   # the CUDA context is gone: a crash, not a property of the config alone
                return Trial(config, "crash", f"CUDA fault: {type(e).__name__}: {str(e)[:400]}")
            return Trial(config, "invalid_compile", f"raised {type(e).__name__}: {str(e)[:400]}")
        if not ok:
            return Trial(config, "invalid_verify", detail[:1000])
        samples = [float(x) for x in timer(self.calls(config), config)]
        return Trial(config, "ok", "", statistics.median(samples), samples)


def _worker(conn, op: str, impl_name: str, device: str, modules: list, timer_ref: str, seed: int, wrapper_ref: str):
    from kernelbench.harness.inspector import find_impl
    registry.load_builtin()
    for m in modules:
        registry.load_module(m)
    spec, impl = registry.get_op(op), find_impl(op, impl_name, wrapper_ref)
    timer = {"gpu": gpu_timer, "cpu": cpu_timer}.get(timer_ref) or resolve(timer_ref)
    bench = None
    conn.send(("ready", None))
    while True:
        msg = conn.recv()
        if msg[0] == "stop":
            return
        if msg[0] == "setup":
            bench = Bench(spec, impl, msg[1], device, seed)
            conn.send(("setup", bench.key()))
        elif msg[0] == "trial":
            try:
                t = bench.trial(msg[1], timer)
            except Exception as e:  # noqa: BLE001 - the timer itself failed: record, keep the worker
                t = Trial(msg[1], "crash", f"raised {type(e).__name__}: {str(e)[:400]}")
            conn.send(("trial", t.__dict__))
            if t.status == "crash":     # a dead CUDA context poisons every later trial: start afresh
                conn.close()
                os._exit(3)
        elif msg[0] == "time":
            conn.send(("time", [float(x) for x in timer(bench.calls(msg[1]), msg[1])]))


class IsolatedRunner:
    """Trials in a worker process (one per implementation, re-used across shapes); a crash or a hang
    costs that config only: the worker is killed, restarted and set up again."""

    def __init__(self, impl, device, modules, timer_ref, seed, timeout_s):
        from kernelbench.harness.inspector import fn_ref
        self.args = (impl.op, impl.name, device, list(modules), timer_ref, seed, fn_ref(impl))
        self.timeout_s = timeout_s
        self.proc = None
        self.params = None
        self.key = None

    def _start(self):
        ctx = mp.get_context("spawn")
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_worker, args=(child, *self.args), daemon=True)
        self.proc.start()
        child.close()
        try:
            self._recv(600)
            if self.params is not None:
                self.conn.send(("setup", self.params))
                _, self.key = self._recv(600)
        except (EOFError, TimeoutError, OSError):
            self._kill()
            raise RuntimeError(f"the tuning worker for {self.args[0]}/{self.args[1]} did not start "
                               "(its traceback is above)") from None

    def setup(self, params: dict) -> dict:
        """Build this shape's inputs in the worker; returns the kernel's tuning key."""
        self.params = dict(params)
        if self.proc is None or not self.proc.is_alive():
            self._start()
        else:
            self.conn.send(("setup", self.params))
            _, self.key = self._recv(600)
        return self.key

    def _recv(self, timeout):
        if not self.conn.poll(timeout):
            raise TimeoutError
        return self.conn.recv()

    def _kill(self):
        if self.proc is not None:
            self.proc.kill()
            self.proc.join(10)
        self.proc = None

    def request(self, msg) -> tuple[str, object]:
        if self.proc is None or not self.proc.is_alive():
            self._start()
        self.conn.send(msg)
        try:
            return self._recv(self.timeout_s)
        except TimeoutError:
            self._kill()
            return "timeout", f"no answer within {self.timeout_s:g} s; worker killed"
        except (EOFError, ConnectionError, OSError):
            if self.proc is not None:
                self.proc.join(5)
            code = self.proc.exitcode if self.proc is not None else None
            self._kill()
            return "crash", f"worker died (exit code {code})"

    def trial(self, config: dict) -> Trial:
        kind, payload = self.request(("trial", config))
        if kind == "trial":
            return Trial(**payload)
        return Trial(config, kind, str(payload))

    def time(self, config: dict) -> list:
        kind, payload = self.request(("time", config))
        return payload if kind == "time" else []

    def close(self):
        if self.proc is not None and self.proc.is_alive():
            try:
                self.conn.send(("stop",))
                self.proc.join(10)
            except (OSError, BrokenPipeError):
                pass
        self._kill()


# --- the trial log ------------------------------------------------------------------------------

class TrialLog:
    """tune_trial / tune_choice rows of one (environment, implementation, shape key)."""

    def __init__(self, store, env_id: int, impl: registry.Impl, shape_key: dict, git_commit: str = ""):
        self.store, self.env_id, self.shape_key, self.git = store, env_id, shape_key, git_commit
        self.impl_id = store.impl_id(impl)
        self.op_id = store.op_id(impl.op, registry.get_op(impl.op).family)

    def finished(self) -> dict[str, Trial]:
        rows = self.store.tune_trials(self.env_id, self.impl_id, self.shape_key)
        return {canon(r["config"]): Trial(r["config"], r["status"], r["reason"], r["median_us"], r["samples"] or [],
                                          resumed=True) for r in rows}

    def record(self, t: Trial) -> None:
        self.store.add_tune_trial(environment_id=self.env_id, implementation_id=self.impl_id,
                                  shape_key=self.shape_key, config=t.config, status=t.status, reason=t.reason,
                                  median_us=t.median_us, samples=t.samples or None, git_commit=self.git)

    def choose(self, config: dict, median_us: float | None) -> None:
        self.store.add_tune_choice(environment_id=self.env_id, op_id=self.op_id, implementation_id=self.impl_id,
                                   shape_key=self.shape_key, config=config, median_us=median_us,
                                   git_commit=self.git)


# --- the search ---------------------------------------------------------------------------------

def interleave(spec: registry.OpSpec, cases: list[dict]) -> list[dict]:
    """Round-robin over batch sizes (C=1, 16, 64 of the first weight shape, then of the next, ...),
    so a run cut short by its budget has tuned every batch size of the first shapes."""
    groups: dict = {}
    for p in cases:
        groups.setdefault(spec.batch(p), []).append(p)
    out = []
    for i in range(max((len(g) for g in groups.values()), default=0)):
        out += [g[i] for g in groups.values() if i < len(g)]
    return out


# 1 / REFINE_SHARE of max_trials is kept for the search around the best sampled config, when the space is larger;
# each of its rounds tries up to REFINE_ROUND untried neighbours of the best so far (their sm_120 checks compile side
# by side), so that the search moves on after a few trials when one of them is faster
REFINE_SHARE = 4
REFINE_ROUND = 4


def refine_slots(space_size: int, max_trials: int) -> int:
    """How many of max_trials the second phase of a sampled search may spend (none when the space is tried whole)."""
    return 0 if space_size <= max_trials else max_trials // REFINE_SHARE


_ABSENT = object()       # an option a config does not name


def neighbours(space: list[dict], config: dict) -> list[dict]:
    """The configs of `space` that differ from `config` in exactly one option (a key whose value differs, or that
    only one of them has), in the space's order."""
    def distance(c):
        return sum(c.get(k, _ABSENT) != config.get(k, _ABSENT) for k in set(c) | set(config))
    return [c for c in space if distance(c) == 1]


def config_space(impl: registry.Impl, params: dict) -> list[dict]:
    if impl.configs is None:
        raise ValueError(f"{impl.op}/{impl.name} declares no config space (register_impl(configs=...))")
    return list(impl.configs(params))


def candidate_configs(impl: registry.Impl, params: dict, max_trials: int,
                      space: list[dict] | None = None) -> tuple[list[dict], int]:
    """The first phase's configs (see the module doc) and how many of `space` (the impl's at params unless given) it
    leaves out."""
    space = config_space(impl, params) if space is None else space
    default = impl.default_config(params) if impl.default_config else None
    if len(space) <= max_trials:
        picked = space
    else:
        from kernelbench.harness.verify_paths import covering_configs
        slots = max_trials - refine_slots(len(space), max_trials)
        forced = [] if default is None else [default]
        for c, _ in (covering_configs(space, default, categorical_only=True) if default is not None else []):
            if canon(c) not in {canon(f) for f in forced}:
                forced.append(c)
        rng = random.Random(canon({"op": impl.op, "params": params}))
        seen = {canon(f) for f in forced}
        near = [c for c in (neighbours(space, default) if default is not None else []) if canon(c) not in seen]
        near = rng.sample(near, min(len(near), max(0, slots - len(forced)) // 2))
        seen |= {canon(c) for c in near}
        others = [c for c in space if canon(c) not in seen]
        picked = forced + near + rng.sample(others, max(0, min(len(others), slots - len(forced) - len(near))))
    if default is not None and canon(default) not in {canon(c) for c in picked}:
        picked = [default] + picked
    return picked, len(space) - len(picked)


def static_check(spec, impl, params: dict, configs: list[dict], modules=(), target: str = "sm_120") -> dict:
    """canonical config -> (status, reason) for the configs unfit for `target`."""
    from kernelbench.harness import inspector
    reports = inspector.inspect_jobs([(spec.name, impl.name, params, c, inspector.fn_ref(impl)) for c in configs], target=target,
                                     modules=tuple(modules))
    bad = {}
    for cfg, rep in zip(configs, reports):
        problems = [p for p in rep["problems"] if "tensor-core" not in p]
        if not problems:
            continue
        text = "; ".join(problems)
        status = ("invalid_smem" if "shared memory" in text else "invalid_spill" if "spills" in text
                  else "invalid_compile")
        bad[canon(cfg)] = (status, f"{target}: {text}")
    return bad


def tune_one(spec, impl, params: dict, *, store, env_id: int, device: str, timer: Timer | None = None,
             timer_ref: str = "gpu", isolate: bool = False, modules=(), max_trials: int = 64, top_k: int = 3,
             rounds: int = 3, budget_s: float = 120.0, trial_timeout_s: float = 60.0, sm120_check: bool = True,
             seed: int = 0, git_commit: str = "", runner: IsolatedRunner | None = None,
             log: Callable[[str], None] = lambda s: None) -> TuneResult:
    """Tune one implementation at one problem (see the module doc for the method). With `isolate`,
    trials run in `runner` (made here and closed at the end when not given)."""
    start = time.monotonic()
    space = config_space(impl, params)
    configs, left_out = candidate_configs(impl, params, max_trials, space)
    own_runner = isolate and runner is None
    if isolate:
        runner = runner or IsolatedRunner(impl, device, modules, timer_ref, seed, trial_timeout_s)
        key = runner.setup(params)
        run_trial, time_cfg = runner.trial, runner.time
    else:
        bench = Bench(spec, impl, params, device, seed)
        timer = timer or gpu_timer
        key = bench.key()
        run_trial = lambda c: bench.trial(c, timer)  # noqa: E731
        time_cfg = lambda c: [float(x) for x in timer(bench.calls(c), c)]  # noqa: E731
    dev_name = tuned_configs.current_device() if device == "cuda" else "cpu"
    trial_log = TrialLog(store, env_id, impl, key, git_commit)
    done = trial_log.finished()
    todo = [c for c in configs if canon(c) not in done]
    bad = static_check(spec, impl, params, todo, modules) if (sm120_check and todo) else {}
    trials = [done[canon(c)] for c in configs if canon(c) in done]

    def run_all(cands: list[dict], bad: dict) -> bool:
        """Trial each config of cands (static failures recorded, never run) -> False when the budget ran out."""
        nonlocal left_out
        for i, c in enumerate(cands):
            if time.monotonic() - start > budget_s:
                left_out += len(cands) - i
                log(f"time budget {budget_s:g} s spent; {len(cands) - i} configs of this shape left untried")
                return False
            t = Trial(c, *bad[canon(c)]) if canon(c) in bad else run_trial(c)
            trial_log.record(t)
            if t.status == "crash" and not isolate:
                raise RuntimeError(f"{canon(c)} crashed this process's CUDA context ({t.reason}); it is recorded. "
                                   "Re-run (finished trials are kept) with --isolate to tune past it")
            trials.append(t)
            log(f"  {canon(c)}: {t.status} {'' if t.median_us is None else f'{t.median_us:.2f} us'} {t.reason[:120]}")
        return True

    try:
        in_budget = run_all(todo, bad)
        # the second phase (module doc): around the best valid config, while places and time are left
        places = refine_slots(len(space), max_trials)
        rng = random.Random(canon({"op": impl.op, "params": params, "phase": 2}))
        while in_budget and places > 0:
            ok = [t for t in trials if t.status == "ok"]
            if not ok:
                break
            best = min(ok, key=lambda t: t.median_us)
            tried = {canon(t.config) for t in trials}
            near = [c for c in neighbours(space, best.config) if canon(c) not in tried]
            if not near:
                break                                   # every neighbour of the best tried: a local best
            near = rng.sample(near, min(len(near), places, REFINE_ROUND))
            places -= len(near)
            left_out -= len(near)
            log(f"around {canon(best.config)} ({best.median_us:.2f} us): {len(near)} of its neighbours")
            trials.extend(done[canon(c)] for c in near if canon(c) in done)
            fresh = [c for c in near if canon(c) not in done]
            in_budget = run_all(fresh, static_check(spec, impl, params, fresh, modules)
                                if (sm120_check and fresh) else {})
        ok = sorted((t for t in trials if t.status == "ok"), key=lambda t: t.median_us)
        best = ok[:top_k]
        retimed: dict[str, list] = {canon(t.config): [] for t in best}
        if len(best) > 1:
            for _ in range(rounds):
                for t in best:
                    retimed[canon(t.config)].extend(time_cfg(t.config))
    finally:
        if own_runner:
            runner.close()
    chosen, chosen_us = None, None
    if best:
        med = {k: statistics.median(v) for k, v in retimed.items() if v}
        if med:
            k = min(med, key=med.get)
            chosen, chosen_us = json.loads(k), med[k]
        else:
            chosen, chosen_us = best[0].config, best[0].median_us
        trial_log.choose(chosen, chosen_us)
    return TuneResult(spec.name, impl.name, dict(params), key, dev_name, trials, chosen, chosen_us, retimed, left_out)


# --- export -------------------------------------------------------------------------------------

def export(results: list[TuneResult], path: Path | None = None, command: str = "", store=None) -> Path:
    """Merge the choices into the tuned JSON (kernelbench/tuned/v1.json unless `path`): an entry per
    (device, op, key); entries of other devices, ops and keys are kept. With `store` (the results
    database), a choice whose code path has no passing `kernelbench verify` on its device is refused
    (verify_paths.UnverifiedPath) before anything is written. So is a config the tuned-config reader would
    reject (tuned_configs.config_problem): one bad entry would make every lookup fall back to the defaults."""
    for r in results:
        problem = r.chosen is not None and tuned_configs.config_problem(r.chosen)
        if problem:
            raise ValueError(f"{r.op}/{r.impl}: config {canon(r.chosen)} cannot be a tuned entry: {problem}")
    if store is not None:
        from kernelbench.harness.verify_paths import require_verified
        for r in results:
            if r.chosen is not None:
                require_verified(store, r.op, r.impl, r.device, r.chosen)
    today = _dt.date.today().isoformat()
    return merge_entries(path, [{"device": r.device, "op": r.op, "impl": r.impl, "key": r.key, "config": r.chosen,
                                 "us": None if r.chosen_us is None else round(r.chosen_us, 3), "measured": today,
                                 "command": command} for r in results if r.chosen is not None])


def merge_entries(path: Path | None, entries: list[dict]) -> Path:
    """Write `entries` into the tuned JSON at `path` (kernelbench/tuned/v1.json when None; created when absent):
    each replaces the entry of the same (device, op, key), every other entry is kept; sorted by (device, op, key);
    the lookups of this process reloaded. A file that is not a tuned-config file of this version is a ValueError
    naming it (nothing written)."""
    path = Path(path) if path else tuned_configs.TUNED_DIR / f"v{tuned_configs.FORMAT_VERSION}.json"
    data = {"version": tuned_configs.FORMAT_VERSION, "entries": []}
    if path.exists():
        try:
            old = json.loads(path.read_text())
        except json.JSONDecodeError as e:
            raise ValueError(f"{path} is not valid JSON ({e}); move it aside before exporting") from None
        if not isinstance(old, dict) or old.get("version") != tuned_configs.FORMAT_VERSION:
            raise ValueError(f"{path} has version {old.get('version') if isinstance(old, dict) else None!r}, "
                             f"expected {tuned_configs.FORMAT_VERSION}")
        data["entries"] = old.get("entries", [])
    for e in entries:
        data["entries"] = [x for x in data["entries"]
                           if not (x.get("device") == e.get("device") and x.get("op") == e["op"]
                                   and x.get("key") == e["key"])]
        data["entries"].append(e)
    data["entries"].sort(key=lambda e: (e.get("device", ""), e["op"], canon(e["key"])))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    tuned_configs.reload()                       # lookups in this process read the file once: let them see it
    return path


# --- a whole run (what `kernelbench tune` calls) --------------------------------------------------

def tune_work(ops, impl_names, shape_sets, batches, contexts, where=None) -> list[tuple]:
    """(spec, impl, cases) for every Triton implementation with a config space among OPS (all when none
    are named), restricted to `impl_names` when given, in name order; cases interleaved by batch (`where`:
    bench.parse_where's filters on the cases' params)."""
    from kernelbench.harness.bench import select_cases
    return [(spec, impl, interleave(spec, select_cases(spec, shape_sets, batches, contexts, where)))
            for spec in registry.ops(list(ops) or None)
            for impl in sorted(registry.impls(spec.name).values(), key=lambda i: i.name)
            if impl.backend == "triton" and impl.configs is not None and (not impl_names or impl.name in impl_names)]


# A case is not started with less than this left of the run's budget (or a tenth of the budget, when smaller): its
# setup (the sm_120 compile of every candidate, the first trial's JIT) runs before tune_one can look at the clock
# (H200, 2026-12-02: a case started 0.3 s before the end of a 160 s budget ran past its 170 s wall limit).
MIN_CASE_S = 10.0


def tune_run(work: list[tuple], *, store, env_id: int, device: str, timer_ref: str, interpret: bool, isolate: bool,
             modules=(), max_trials: int, top_k: int, rounds: int, budget_s: float, trial_timeout: float,
             sm120_check: bool, git_commit: str, export_path=None, no_export: bool, command: str = "",
             advance: Callable[[str], None] = lambda s: None,
             log: Callable[[str], None] = lambda s: None) -> tuple[list[TuneResult], list[str]]:
    """Tune every (spec, impl, cases) of `work` within `budget_s` seconds in all; one failing shape is
    logged and skipped. Choices are exported as they come (unless `no_export`), so a run cut short keeps
    them; each result says where its choice went (exported_to) or why it was refused (export_refused).
    Returns the results and the 'op/impl shape' labels left untuned when the budget ran out."""
    start = time.monotonic()
    results, skipped = [], []
    for spec, impl, cases in work:
        runner = IsolatedRunner(impl, device, modules, timer_ref, 0, trial_timeout) if isolate else None
        try:
            for params in cases:
                left = budget_s - (time.monotonic() - start)
                advance(f"{spec.name}/{impl.name} {spec.label(params)}"[:80])
                if left <= 0 or left < min(MIN_CASE_S, 0.1 * budget_s):
                    skipped.append(f"{spec.name}/{impl.name} {spec.label(params)}")
                    continue
                log(f"[bold]{spec.name}/{impl.name}[/bold] {spec.label(params)}")
                try:
                    r = tune_one(spec, impl, params, store=store, env_id=env_id, device=device,
                                 timer=cpu_timer if (interpret and not isolate) else None,
                                 timer_ref=timer_ref, isolate=isolate, modules=modules, max_trials=max_trials,
                                 top_k=top_k, rounds=rounds, budget_s=left, trial_timeout_s=trial_timeout,
                                 sm120_check=sm120_check, git_commit=git_commit, runner=runner, log=log)
                except Exception as e:  # noqa: BLE001 - one shape failing must not end the run
                    log(f"[red]  failed: {type(e).__name__}: {e}[/red]")
                    continue
                results.append(r)
                if not no_export and r.chosen is not None:   # as it goes: a run cut short keeps its choices
                    _export_one(r, export_path, command, store, log)
        finally:
            if runner is not None:
                runner.close()
    return results, skipped


def _export_one(r: TuneResult, path, command: str, store, log: Callable[[str], None]) -> None:
    """Export one choice, noting on `r` the file it went to or, when export() refused it, why: its path has no
    passing verify in the database (verify_paths.UnverifiedPath), a config the tuned-config reader would reject, or
    a tuned file that cannot be merged into. A refused choice writes nothing."""
    try:
        r.exported_to = str(export([r], path, command=command, store=store))
    except ValueError as e:
        r.export_refused = str(e)
        log(f"[red]  not exported: {e}[/red]")


def export_summary(results: list[TuneResult]) -> list[str]:
    """What tune_run's export did, for the command to print: "N choices exported to PATH" per file written, then
    "M not exported" with each refused choice and its reason (an unverified path's names the `kernelbench verify` to
    run first), and the results that chose no config. No line claims an export that did not happen."""
    lines = []
    for path, n in Counter(r.exported_to for r in results if r.exported_to).items():
        lines.append(f"{_choices(n)} exported to {path}")
    refused = [r for r in results if r.export_refused]
    if refused:
        lines.append(f"{_choices(len(refused))} not exported (refused, nothing written):")
        lines += [f"  {r.export_refused} (key {canon(r.key)})" for r in refused]
    unchosen = [r for r in results if r.chosen is None]
    if unchosen:
        lines.append(f"{len(unchosen)} tuned without a valid config, nothing to export: "
                     + ", ".join(f"{r.op}/{r.impl} {canon(r.key)}" for r in unchosen))
    return lines


def _choices(n: int) -> str:
    return f"{n} choice" + ("" if n == 1 else "s")


SUMMARY_COLUMNS = ("op", "impl", "key", "ok", "invalid", "untried", "chosen", "us")


def summary_rows(results: list[TuneResult]) -> list[tuple[str, ...]]:
    """One row per result, in SUMMARY_COLUMNS' order, for the command's table."""
    rows = []
    for r in results:
        n_ok = sum(tr.status == "ok" for tr in r.trials)
        rows.append((r.op, r.impl, canon(r.key)[:60], str(n_ok), str(len(r.trials) - n_ok), str(r.untried),
                     "-" if r.chosen is None else canon(r.chosen)[:70],
                     "-" if r.chosen_us is None else f"{r.chosen_us:.2f}"))
    return rows
