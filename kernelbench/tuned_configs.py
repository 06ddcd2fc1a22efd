"""Tuned configs at run time.

`kernelbench tune` exports its choices to kernelbench/tuned/<version>.json:
    {"version": 1, "entries": [{"device": "NVIDIA H200", "op": "fp8_linear",
                                 "key": {"M": 16, "N": 1024, "K": 4096}, "config": {...},
                                 "us": 7.1, "measured": "2026-11-29", "command": "..."}]}
Kernels call `lookup(op, key, default)` when the caller passes no config. Resolution: the exact
(device, op, key); else the nearest key on the same device (log distance over numeric fields, equal
non-numeric fields required; never across a registered op's batch field, `batch_field`) whose config is of the
default's family (`same_family`: a one-row GEMV is never replaced by a tile tuned at more rows, nor the reverse);
else the same on any device (not on the CPU: the interpreter
never borrows GPU-tuned tiles); else `default`. Anything but an exact hit
warns once per (op, key). A KERNELBENCH_TUNED that names a missing, unreadable or malformed file is a
TuningError naming the variable and the path (library calls included, not only the CLI); an unreadable
packaged file warns and falls back to the defaults. The file is read once per KERNELBENCH_TUNED value
and cached: a kernel call does no file I/O (`reload()` after rewriting a file in-process).
"""
from __future__ import annotations

import contextlib
import json
import math
import os
import re
import warnings
from dataclasses import asdict, dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

TUNED_DIR = Path(__file__).parent / "tuned"
ENV_FILE = "KERNELBENCH_TUNED"          # a JSON file to use instead of the packaged one
ENV_PIN = "KERNELBENCH_PIN_CONFIG"     # "op=json" pins one config for an op (escape hatch)
FORMAT_VERSION = 1

_warned: set = set()
_recorders: list = []     # callables given the Resolution of every lookup (observe_lookups, record_resolutions)


@contextlib.contextmanager
def _recording(record):
    _recorders.append(record)
    try:
        yield
    finally:
        _recorders.remove(record)


@contextlib.contextmanager
def observe_lookups():
    """Collect the (op, key) of every lookup made inside the block (the tuner uses it to export
    its choice under exactly the key the kernel will ask for)."""
    seen: list[tuple[str, dict]] = []
    with _recording(lambda r: seen.append((r.op, dict(r.key)))):
        yield seen


@contextlib.contextmanager
def record_resolutions():
    """Collect the Resolution of every lookup made inside the block (decode-bench reports which configs a step
    ran: tuned at that key, borrowed from another key or device, or the kernel's default)."""
    seen: list[Resolution] = []
    with _recording(seen.append):
        yield seen


SOURCES = ("exact", "nearest", "other device", "default", "pinned", "trial")   # Resolution.source, report order
TUNED_SOURCES = SOURCES[:3]                                             # the ones that come from a tuned entry


@contextlib.contextmanager
def entries_without(op: str):
    """Inside the block, lookups see the tuned entries in use less every entry of `op` (so `op`'s kernels run their
    defaults). -> the number of entries removed."""
    global _excluded_op
    if _excluded_op is not None:
        raise RuntimeError(f"entries_without({op!r}) inside entries_without({_excluded_op!r})")
    removed = sum(e["op"] == op for e in entries())
    _excluded_op = op
    try:
        yield removed
    finally:
        _excluded_op = None


PIN_BASES = ("default", "lookup")


@dataclass(frozen=True)
class Pin:
    """A config for `op`'s lookups whose key matches `where` ((KEY, accepted values as text), ...; empty: every
    key), set in-process by `pins_applied` (decode-bench and bench --try). `over`: what the pin's keys go over,
    "default" (the lookup's default: a complete config, e.g. an exported entry, or verify's empty pin that forces
    the default) or "lookup" (the config the lookup finds without the pin, a tuned entry or the default: a partial
    pin changes only the keys it names in the step as it runs)."""
    op: str
    config: dict
    where: tuple = ()
    over: str = "default"

    def __post_init__(self):
        if self.over not in PIN_BASES:
            raise ValueError(f"Pin.over={self.over!r}: one of {PIN_BASES}")

    def matches(self, op: str, key: dict) -> bool:
        return op == self.op and key_matches(key, self.where)


def key_matches(key: dict, where) -> bool:
    """Whether `key` passes every (KEY, values) filter of `where` (compared as text, so M=64 and kind=csa alike; a
    filter on a field the key lacks excludes it)."""
    return all(k in key and str(key[k]) in vals for k, vals in where)


_pins: list[Pin] = []      # pins_applied's, first match wins


@contextlib.contextmanager
def pins_applied(pins):
    """Inside the block, a lookup that one of `pins` matches returns that pin's config (source "trial") over the default
    or over the lookup without it (Pin.over), before KERNELBENCH_PIN_CONFIG and every tuned entry; the first matching
    pin wins, inner blocks first."""
    pins = list(pins)
    _pins[:0] = pins
    try:
        yield pins
    finally:
        del _pins[:len(pins)]


@contextlib.contextmanager
def _pins_set_aside(n: int):
    """Inside the block the first `n` pins (a matching pin and the inner ones before it) answer nothing: the lookup a
    Pin.over "lookup" pin goes over."""
    aside = _pins[:n]
    del _pins[:n]
    try:
        yield
    finally:
        _pins[:0] = aside


def summarize(resolutions) -> list[Resolution]:
    """One Resolution per distinct (op, key, source, config), in first-seen order (a step looks a key up once per
    layer)."""
    out, seen = [], set()
    for r in resolutions:
        tag = (r.op, json.dumps(r.key, sort_keys=True), r.source, json.dumps(r.config, sort_keys=True, default=str))
        if tag not in seen:
            seen.add(tag)
            out.append(r)
    return out


def tuned_file() -> Path:
    env = os.environ.get(ENV_FILE)
    return Path(env) if env else TUNED_DIR / f"v{FORMAT_VERSION}.json"


_entries_cache: dict[str, list[dict]] = {}    # KERNELBENCH_TUNED value ("" = packaged file) -> entries
_excluded_op: str | None = None               # entries_without: the op whose entries lookups do not see


def reload() -> None:
    """Forget the cached tuned entries (after `kernelbench tune` rewrote a file in this process)."""
    _entries_cache.clear()


def read_entries(path: Path, known_keys=None, label: str | None = None) -> list[dict]:
    """Every entry of the tuned-config file at `path`, checked; TuningError (prefixed `label`, default
    "tuned configs <path>") for a missing, unreadable or malformed file or entry."""
    where = label or f"tuned configs {path}"
    if not path.is_file():
        raise TuningError(f"{where}: no such file")
    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise TuningError(f"{where}: unreadable ({e})") from None
    if not isinstance(data, dict) or not isinstance(data.get("entries"), list):
        raise TuningError(f"{where}: expected {{\"version\": {FORMAT_VERSION}, \"entries\": [...]}}")
    if data.get("version") != FORMAT_VERSION:
        raise TuningError(f"{where}: version {data.get('version')!r}, expected {FORMAT_VERSION}")
    for i, e in enumerate(data["entries"]):
        if not isinstance(e, dict) or not {"op", "key", "config"} <= set(e) or not isinstance(e["key"], dict):
            raise TuningError(f"{where}: entry {i} needs op, key (an object) and config")
        problem = config_problem(e["config"], known_keys(e["op"]) if known_keys else None)
        if problem:
            raise TuningError(f"{where}: entry {i} ({e['op']} {e['key']}): {problem}")
    return data["entries"]


def _env_label() -> str:
    return f"{ENV_FILE}={os.environ[ENV_FILE]}"


def _load_entries(env: str) -> list[dict]:
    if env:                      # the user named a file: anything wrong with it is their error to see
        return read_entries(Path(env), label=_env_label())
    path = tuned_file()
    if not path.exists():
        return []
    try:
        return read_entries(path)
    except TuningError as e:
        warnings.warn(f"{e}; using defaults")
        return []


def entries() -> list[dict]:
    """The tuned entries in use: read once per KERNELBENCH_TUNED value, then served from memory (less one op's
    inside `entries_without`)."""
    env = os.environ.get(ENV_FILE, "")
    found = _entries_cache.get(env)
    if found is None:
        found = _entries_cache[env] = _load_entries(env)
    return found if _excluded_op is None else [e for e in found if e["op"] != _excluded_op]


def current_device() -> str:
    try:
        import torch
        if torch.cuda.is_available():
            return torch.cuda.get_device_name()
    except Exception:  # noqa: BLE001 - a broken CUDA setup must not stop a lookup
        pass
    return "cpu"


def key_distance(a: dict, b: dict, exact: tuple[str, ...] = ()) -> float:
    """Log distance over the numeric fields; any other field, and each field named in `exact`, must be equal
    (else inf: never borrowed across)."""
    if set(a) != set(b):
        return math.inf
    d = 0.0
    for k, va in a.items():
        vb = b[k]
        if k in exact and va != vb:
            return math.inf
        if isinstance(va, (int, float)) and isinstance(vb, (int, float)) and not isinstance(va, bool):
            d += abs(math.log2(max(va, 1) / max(vb, 1)))
        elif va != vb:
            return math.inf
    return d


_batch_keys: dict[str, str | None] = {}     # op -> OpSpec.batch_key, for registered ops only (one may register later)


def _batch_key(op: str) -> str | None:
    if op not in _batch_keys:
        from kernelbench import registry
        try:
            _batch_keys[op] = registry.get_op(op).batch_key
        except registry.RegistryError:
            return None
    return _batch_keys[op]


def batch_field(op: str, key: dict) -> tuple[str, ...]:
    """The key field holding a registered op's decode batch (OpSpec.batch_key: M or T), when the key has it: an entry
    is never borrowed across it. The defaults size their splits and tiles by the batch, and a tile tuned at another
    batch lost to them in the step (H200, session 21 call 3: attention_front at M = 16 borrowing M = 64's choice, 43
    layers, C = 16: 6.774 / 6.772 ms against 6.647 / 6.653)."""
    field = _batch_key(op)
    return (field,) if field and field in key else ()


# Config fields whose value 1 selects another code path than any larger value: a row tile of one (BM = 1) is the FMA
# GEMV, more rows the tensor-core tile (fp8_linear v2, the bf16 GEMMs, the attention front's epilogue GEMMs).
ONE_OR_MANY = ("BM",)


def same_family(default: dict, config: dict) -> bool:
    """Whether a config tuned at another key may stand in for `default` at this one: for every ONE_OR_MANY field,
    both on the same side of 1. Borrowing moves tile sizes and counts (and choices the tuner weighed against each
    other at its key, e.g. fp8_linear's PATH); it never turns a GEMV into a tile nobody measured at this key. H200,
    session 21: with attention_front tuned at M = 16 only, M = 1 borrowed that tile merged over its GEMV default,
    and grouped_wo_a at one row likewise: the 43-layer step at C = 1 took 3.80 instead of 3.69 ms."""
    return all((default[k] == 1) == (config[k] == 1) for k in ONE_OR_MANY if k in default and k in config)


class TuningError(ValueError):
    """A malformed pinned config or tuned-config file: a usage error, named by variable or file."""


_INT_KEYS = {"num_stages", "maxnreg"}      # launch options that take a count, never a switch
_OFF_AT_ZERO = {"ROW_REGS", "SEARCH_WINDOW"}   # counts whose 0 means off (the indexer top-k: its held rows, its window)


def _is_pow2_key(key: str) -> bool:
    """Tile sizes and warp counts must be powers of two (tl.arange, the layouts): BLOCK_*, BM, BN_UP, ..."""
    return key == "num_warps" or key.startswith("BLOCK") or re.fullmatch(r"B[A-Z](_[A-Z]+)?", key) is not None


def config_problem(cfg: Any, known_keys: set | None = None) -> str | None:
    """Why `cfg` cannot be a kernel config (a dict of positive ints, powers of two for tile sizes and
    num_warps, short strings such as DECODE, or true / false for a switch such as mHC's SIMT / RELOAD), or None
    when it can."""
    if not isinstance(cfg, dict):
        return f"a config must be a JSON object, got {type(cfg).__name__} {cfg!r}"
    for k, v in cfg.items():
        if known_keys is not None and k not in known_keys:
            return f"unknown key {k!r} (the kernel's config has {', '.join(sorted(known_keys))})"
        if isinstance(v, str) and not _is_pow2_key(k):
            continue
        if isinstance(v, bool) and not _is_pow2_key(k) and k not in _INT_KEYS:
            continue
        if isinstance(v, bool) or not isinstance(v, int):
            return f"{k}={v!r}: must be an integer"
        if v < (0 if k.endswith("_MAX_T") or k in _OFF_AT_ZERO else 1):   # a token threshold (EMIT_MAX_T) 0: never
            return f"{k}={v}: must be positive"
        if _is_pow2_key(k) and v & (v - 1):
            return f"{k}={v}: must be a power of two"
    return None


def pinned_configs() -> dict[str, dict]:
    """KERNELBENCH_PIN_CONFIG ("op=json;op2=json") parsed and checked; TuningError names the variable."""
    return dict(_parse_pins(os.environ.get(ENV_PIN, "")))


@lru_cache(maxsize=8)
def _parse_pins(raw: str) -> dict[str, dict]:
    out: dict[str, dict] = {}
    for part in filter(None, (p.strip() for p in raw.split(";"))):
        name, eq, cfg = part.partition("=")
        if not eq or not name.strip():
            raise TuningError(f"{ENV_PIN}: {part!r} is not op=<JSON object> (e.g. fp8_linear={{\"BM\":16}})")
        try:
            value = json.loads(cfg)
        except json.JSONDecodeError as e:
            raise TuningError(f"{ENV_PIN}: the config for {name.strip()!r} is not JSON ({e})") from None
        problem = config_problem(value)
        if problem:
            raise TuningError(f"{ENV_PIN}: the config for {name.strip()!r}: {problem}")
        out[name.strip()] = value
    return out


def _pinned(op: str) -> dict | None:
    return _parse_pins(os.environ.get(ENV_PIN, "")).get(op)


def check_settings(known_ops=None, known_keys=None) -> None:
    """Reject malformed tuning settings before anything runs (a usage error, not a kernel failure):
    KERNELBENCH_PIN_CONFIG (syntax, values, ops in `known_ops`), KERNELBENCH_TUNED (the file must
    exist) and every entry of the tuned-config file in use. `known_keys(op)` -> the config keys an
    op's kernel takes (None: unknown). Raises TuningError naming the variable or file."""
    for op, cfg in pinned_configs().items():
        if known_ops is not None and op not in known_ops:
            raise TuningError(f"{ENV_PIN}: unknown op {op!r}")
        keys = known_keys(op) if known_keys else None
        problem = config_problem(cfg, keys)
        if problem:
            raise TuningError(f"{ENV_PIN}: the config for {op!r}: {problem}")
    path = tuned_file()
    if os.environ.get(ENV_FILE):
        read_entries(path, known_keys, label=_env_label())
    elif path.is_file():
        read_entries(path, known_keys)


def env_settings() -> dict[str, str]:
    """The environment variables that change which config a kernel runs (a replay must carry them)."""
    return {k: os.environ[k] for k in (ENV_PIN, ENV_FILE) if os.environ.get(k)}


@dataclass(frozen=True)
class Resolution:
    """How one lookup found its config: `source` is "trial" (`pins_applied`), "pinned" (KERNELBENCH_PIN_CONFIG), "exact" (a tuned entry at
    this key on this device), "nearest" (an entry at another key on this device), "other device" (an entry tuned on
    another GPU, at `tuned_key`) or "default" (the kernel's own rule: no usable entry)."""
    op: str
    key: dict
    source: str
    config: dict
    tuned_key: dict | None = None
    tuned_device: str | None = None
    tuned_us: float | None = None

    def as_json(self) -> dict:
        return asdict(self)


def resolve(op: str, key: dict[str, Any], default: dict, device: str | None = None,
            exact: tuple[str, ...] = ()) -> Resolution:
    """`lookup` without its side effects (no observers, no warning): the config and where it came from. A trial pin
    (`pins_applied`) answers first: over the default, or (Pin.over "lookup") over what the lookup finds without it,
    whose entry the resolution still names (tuned_key, tuned_device, tuned_us)."""
    for i, pin in enumerate(_pins):
        if pin.matches(op, key):
            if pin.over == "default":
                return Resolution(op, dict(key), "trial", {**default, **pin.config})
            with _pins_set_aside(i + 1):
                base = resolve(op, key, default, device, exact)
            return Resolution(op, dict(key), "trial", {**base.config, **pin.config}, base.tuned_key,
                              base.tuned_device, base.tuned_us)
    pinned = _pinned(op)
    if pinned is not None:
        return Resolution(op, dict(key), "pinned", {**default, **pinned})
    device = device or current_device()
    exact = tuple(exact) + batch_field(op, key)
    candidates = [e for e in entries() if e["op"] == op]
    scopes = [[e for e in candidates if e.get("device") == device]]
    if device != "cpu":        # the interpreter never borrows GPU-tuned tiles
        scopes.append(candidates)
    for scope in scopes:
        best, best_d = None, math.inf
        for e in scope:
            d = key_distance(key, e["key"], exact)
            if d < best_d and (d == 0 or same_family(default, e["config"])):
                best, best_d = e, d
        if best is not None:
            source = "other device" if best.get("device") != device else "exact" if best_d == 0 else "nearest"
            return Resolution(op, dict(key), source, {**default, **best["config"]}, dict(best["key"]),
                              best.get("device"), best.get("us"))
    return Resolution(op, dict(key), "default", dict(default))


def lookup(op: str, key: dict[str, Any], default: dict, device: str | None = None,
           exact: tuple[str, ...] = ()) -> dict:
    """The config for (op, key): pinned, else the exact or nearest tuned entry (see the module docstring), else
    `default`. `exact`: key fields a tuned entry must match to be borrowed at another key (fields that choose a
    different code path, e.g. compressor_step's ratio: a config tuned at ratio 4 is no evidence at ratio 128)."""
    device = device or current_device()
    r = resolve(op, key, default, device, exact)
    for record in _recorders:
        record(r)
    if r.source in ("nearest", "other device"):
        _warn_once(op, key, f"using the config tuned for {r.tuned_key} on {r.tuned_device}", device)
    elif r.source == "default" and device != "cpu":     # the interpreter has nothing to tune: no warning there
        _warn_once(op, key, "no tuned config; using the default", device)
    return dict(r.config)


def _warn_once(op: str, key: dict, what: str, device: str) -> None:
    tag = (op, device, tuple(sorted(key.items())))
    if tag in _warned or os.environ.get("KERNELBENCH_QUIET_TUNING") == "1":
        return
    _warned.add(tag)
    warnings.warn(f"{op} {key}: {what}", stacklevel=3)
