"""decode-bench --try: a config judged in the step, not in the op alone.

A per-op tune times the op by itself; in the decode step its launches share the GPU with their neighbours and a
side lane (H200, session 21: the shared expert's FP8 GEMMs tuned 24-30% faster alone made the C = 64 step 0.8-1.1%
slower). A trial pins configs for some lookups of the step (`tuned_configs.pins_applied`) and decode-bench times the
step with them against the step as it runs, in interleaved pairs on the same cache and inputs
(`decode_bench.try_configs`, the machinery of --ablate-tuned).

Spelling, one trial: OP[@KEY=V[,V...]]...=JSON, several ops joined by ";", e.g.
    moe_routed@T=16,64={"GLUE": "v4"}
    fp8_linear@N=256@K=4096={"BN": 128};fp8_linear@N=4096@K=256={"SPLIT": 8}
The @ filters select lookup keys as `--where` selects cases (values compared as text); without one the config
applies at every key of the op. The JSON object is merged over the config the lookup finds without the trial (a
tuned entry, or the kernel's default: tuned_configs.Pin over "lookup"), so a partial config changes only the keys it
names in the step as it runs. Until session 36 it went over the kernel's default, as KERNELBENCH_PIN_CONFIG's does,
which at a key with a tuned entry also dropped that entry's tile (session 35's XQ "once" rows at 64 tokens compared
the default's tile, PATH v1 at K = 4096, against the tuned one). An empty object, OP@KEY=V={}, times the kernel's
default at those keys instead of their tuned entries (over the default: nothing to merge). --try-entries' configs are
complete: over the default, as exported.
Before the trials of a C, an A/A control (`decode_bench.control_trial`: the step captured again, nothing changed)
shows what a second capture alone does to the paired delta; a trial is judged faster or slower only when its interval
clears that move, of either sign (`controlled_verdict`; `--no-try-control` turns it off).
A trial may also set the step's stream and launch settings (STEP_SETTINGS), e.g.
    KERNELBENCH_KV_LANE_FORK=after
    KERNELBENCH_STREAM_PRIORITY=main,lane;KERNELBENCH_KV_LANE_FORK=after
    KERNELBENCH_PDL=0;attention_front@M=1={"SPLIT": 16}
They are read when the step's streams are made and its kernels launched, so the trial's step, captured with them set
(`settings_applied`: the variables set, the decoder's lanes and the ops' side streams made again), holds them, and
the step as it runs keeps its own. Until session 45 such settings could only be compared in separate decode-bench
runs, one capture each, without pairs or a control.
`--try-entries FILE` makes one trial of each entry of a tuned-config file at exactly its key, so what `kernelbench
tune --export FILE` chose alone is judged in the step before it goes into the packaged table; `--keep-faster OUT`
then merges the entries the step judged faster into OUT (`faster_entries`, harness.tune.merge_entries).
"""
from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass

from kernelbench import tuned_configs
from kernelbench.decoder.lanes import KV_FORK_ENV, KV_LANE_ENV, kv_fork_from_env, kv_lane_from_env
from kernelbench.harness.bench import parse_where
from kernelbench.usage import env_set
from kernelbench.kernels.common import (FP8_PROMOTE_ENV, PDL_ENV, PRIORITY_ENV, beside_streams_made_again, fp8_promote,
                                       high_priority_kinds, pdl_mode)

EXAMPLE = 'moe_routed@T=16,64={"GLUE": "v4"}'


# The environment settings a trial may change (read when a stream is made or a kernel launched), each with the
# function that reads it (and refuses a bad value).
STEP_SETTINGS = {PRIORITY_ENV: high_priority_kinds, PDL_ENV: pdl_mode, KV_LANE_ENV: kv_lane_from_env,
                 KV_FORK_ENV: kv_fork_from_env, FP8_PROMOTE_ENV: fp8_promote}


@dataclass(frozen=True)
class Trial:
    text: str                           # as given on the command line
    pins: tuple[tuned_configs.Pin, ...]
    env: tuple[tuple[str, str], ...] = ()   # STEP_SETTINGS the trial sets, (name, value)


def _setting_problem(name: str, value: str) -> str | None:
    """Why `name`=`value` is not a setting a trial can make (None: it is): not in STEP_SETTINGS, or refused by the
    check that reads it."""
    if name not in STEP_SETTINGS:
        return f"{name} is not a setting a trial can change; one of {', '.join(STEP_SETTINGS)}"
    with env_set(((name, value),)):
        try:
            STEP_SETTINGS[name]()
        except Exception as e:  # noqa: BLE001 - the check's own words (a UsageProblem) name the value
            return str(e)
    return None


@contextlib.contextmanager
def settings_applied(env, model=None):
    """Inside the block the trial's STEP_SETTINGS hold for what is made and launched: the variables set; `model`'s
    lanes (a decoder Transformer's `env.lanes`) made again from them, with the same sites, keeping the KV lane's reach
    and fork unless the trial sets them (Lanes.made_again); with a priority, the ops' own side streams made again
    (kernels/common.py beside_streams_made_again). After it, all three as before. Without settings the block runs as
    it stands."""
    if not env:
        yield
        return
    names = {name for name, _ in env}
    holder = getattr(model, "env", None)
    old = getattr(holder, "lanes", None)
    streams = beside_streams_made_again() if PRIORITY_ENV in names else contextlib.nullcontext()
    with env_set(env), streams:
        try:
            if old is not None:
                holder.lanes = old.made_again(KV_LANE_ENV in names, KV_FORK_ENV in names)
            yield
        finally:
            if old is not None:
                holder.lanes = old


def parse_trial(text: str, known_ops=None, known_keys=None, over: str = "lookup") -> Trial:
    """One --try value -> Trial. `known_ops`: the registered op names (None: unchecked); `known_keys(op)`: the
    config keys the op's kernels take (None: unchecked); `over`: what each pin's keys go over (tuned_configs.Pin).
    Raises ValueError naming the part that is wrong."""
    pins, env = [], []
    for part in filter(None, (p.strip() for p in text.split(";"))):
        if part.startswith("KERNELBENCH_"):          # a STEP_SETTINGS variable, NAME=VALUE
            name, eq, value = (s.strip() for s in part.partition("="))
            problem = _setting_problem(name, value) if eq else f"expected {name}=VALUE"
            if problem:
                raise ValueError(f"--try {part!r}: {problem}")
            env.append((name, value))
            continue
        head, brace, body = part.partition("={")
        op, *filters = [f.strip() for f in head.split("@")]
        if not brace or not op:
            raise ValueError(f"--try {part!r}: expected OP[@KEY=V[,V...]...]={{JSON object}}, e.g. {EXAMPLE}")
        if known_ops is not None and op not in known_ops:
            raise ValueError(f"--try {part!r}: unknown op {op!r}")
        try:
            where = parse_where(filters)
        except ValueError as e:
            raise ValueError(f"--try {part!r}: a filter is not KEY=V[,V...] ({e})") from None
        try:
            config = json.loads("{" + body)
        except json.JSONDecodeError as e:
            raise ValueError(f"--try {part!r}: the config is not JSON ({e})") from None
        problem = tuned_configs.config_problem(config, known_keys(op) if known_keys else None)
        if problem:
            raise ValueError(f"--try {part!r}: {problem}")
        pins.append(tuned_configs.Pin(op, config, tuple(sorted(where.items())), over if config else "default"))
    if not pins and not env:
        raise ValueError(f"--try {text!r}: no config given, e.g. {EXAMPLE}")
    if len({name for name, _ in env}) < len(env):
        raise ValueError(f"--try {text!r}: a setting is named twice")
    return Trial(text, tuple(pins), tuple(env))


def trial_text(op: str, key: dict, config: dict) -> str:
    """The --try spelling of `config` pinned at exactly `key`."""
    return op + "".join(f"@{k}={v}" for k, v in key.items()) + "=" + json.dumps(config, sort_keys=True)


def trials_from_entries(path, known_ops=None, known_keys=None) -> list[Trial]:
    """--try-entries: one trial per entry of a tuned-config file (the format `kernelbench tune --export` writes,
    read and checked by tuned_configs.read_entries), its config pinned at exactly its key (every key field a
    filter), whatever device the entry names. Raises ValueError for an unreadable file or an unknown op."""
    from pathlib import Path
    try:
        entries = tuned_configs.read_entries(Path(path), known_keys, label=f"--try-entries {path}")
    except tuned_configs.TuningError as e:
        raise ValueError(str(e)) from None
    if not entries:
        raise ValueError(f"--try-entries {path}: the file has no entries")
    return [parse_trial(trial_text(e["op"], e["key"], e["config"]), known_ops, known_keys, over="default")
            for e in entries]


def faster_entries(path, points, command: str) -> tuple[list[dict], list[str]]:
    """--keep-faster: the entries of the tuned-config file at `path` (tried by --try-entries) that the step judged
    faster: timed at one C or more and "faster" at every C where timed. Each kept entry gains a `step` record (the
    C, step and trial medians, paired delta and its interval, pairs, `command`). -> (kept entries, one line per
    entry saying what happened to it)."""
    from pathlib import Path
    kept, lines = [], []
    for e in tuned_configs.read_entries(Path(path), label=f"--try-entries {path}"):
        text = trial_text(e["op"], e["key"], e["config"])
        rows = [(p.batch, r) for p in points for r in p.trials if r["trial"] == text and "pairs" in r]
        verdicts = sorted({r["verdict"] for _, r in rows})
        if rows and verdicts == ["faster"]:
            kept.append({**e, "step": {
                "verdict": "faster", "command": command,
                "points": [{"C": c, "step_ms": round(r["step_ms"], 4), "trial_ms": round(r["trial_ms"], 4),
                            "paired_delta_ms": round(r["paired_delta_ms"], 4), "pairs": r["pairs"],
                            "delta_ci_ms": None if r["delta_ci_ms"] is None else [round(v, 4) for v in
                                                                                   r["delta_ci_ms"]]}
                           for c, r in rows]}})
            lines.append(f"kept {text}: faster at C = {', '.join(str(c) for c, _ in rows)}")
        else:
            why = ", ".join(f"C = {c}: {r['verdict']}" for c, r in rows) or "not timed (matched no lookup)"
            lines.append(f"not kept {text}: {why}")
    return kept, lines


def pinned_keys(looked) -> dict[str, int]:
    """The distinct lookup keys per op that a trial's pins answered (the Resolutions recorded while its step was
    captured or first run)."""
    out: dict[str, int] = {}
    for r in tuned_configs.summarize(looked):
        if r.source == "trial":
            out[r.op] = out.get(r.op, 0) + 1
    return out


def print_trials(points, console, confidence: float, min_pairs: int) -> None:
    """--try's table: per C and trial, the step's and the trial's medians and the paired differences."""
    from rich.table import Table
    rows = [(p, r) for p in points for r in p.trials]
    if not rows:
        return
    t = Table(title="configs tried in the step (--try): the step as it runs and the step with the trial's configs "
                    "alternate A B B A on the same cache and inputs",
              caption=f"delta = step - trial, per pair (+: the trial is faster); verdict from the {confidence:.0%} "
                      f"sign-test interval of the median delta: faster (above 0), slower (below 0), else within "
                      f"noise; none under {min_pairs} pairs"
                      + ("; the control row is the step captured again with nothing changed (A/A), and a trial is "
                         "faster or slower only when its interval also clears the control's move, of either sign"
                         if any(r.get("control") for _, r in rows) else ""))
    for col in ("C", "trial", "keys pinned", "pairs", "step ms", "trial ms", "paired delta ms", "delta IQR ms",
                f"delta {confidence:.0%} CI ms", "verdict"):
        t.add_column(col, justify="left" if col in ("trial", "keys pinned", "verdict") else "right")
    for p, r in rows:
        keys = ", ".join([f"{op} {n}" for op, n in r["pinned"].items()] + r.get("settings", []))
        if "pairs" not in r:                         # refused, or it matched no lookup: nothing was timed
            t.add_row(str(p.batch), r["trial"], keys, "", "", "", "", "", "", r["verdict"])
            continue
        t.add_row(str(p.batch), r["trial"], keys, str(r["pairs"]), f"{r['step_ms']:.3f}", f"{r['trial_ms']:.3f}",
                  *paired_cells(r))
    console.print(t)


def paired_cells(r: dict) -> tuple[str, str, str, str]:
    """The last four cells of a paired-comparison row (--ablate-tuned's and --try's tables): the median paired
    delta, its quartiles, its interval and the verdict (with the timing method when not the usual one)."""
    ci = r["delta_ci_ms"]
    return (f"{r['paired_delta_ms']:+.3f}", f"{r['delta_q1_ms']:+.3f} .. {r['delta_q3_ms']:+.3f}",
            "" if ci is None else f"{ci[0]:+.3f} .. {ci[1]:+.3f}",
            r["verdict"] + ("" if r["method"] in ("graph replay", "eager") else f"; {r['method']}"))
