"""Usage checks that run before any example or timing does: a mistake in the command line or the
environment is the user's to fix, so it ends in a one-line error and nothing is recorded as a
kernel result (issue 10, item 2)."""
from __future__ import annotations

import contextlib
import os
from functools import lru_cache


class UsageProblem(ValueError):
    pass


def env_choice(name: str, default: str, choices: tuple[str, ...]) -> str:
    """The value of environment switch `name` (`default` when unset), one of `choices`; else a UsageProblem naming
    the variable, its value and the choices."""
    value = os.environ.get(name, default).strip()
    if value not in choices:
        raise UsageProblem(f"{name} must be one of {', '.join(choices)}, got {name}={value!r}")
    return value


def env_positive_int(name: str) -> int | None:
    """Environment switch `name`: None when unset or empty, else a positive integer; anything else a UsageProblem
    naming the variable and its value."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return None
    n = positive_int(raw)
    if n is None:
        raise UsageProblem(f"{name} must be a positive integer, got {name}={raw!r}")
    return n


@contextlib.contextmanager
def env_set(env):
    """The variables of `env` ((name, value) pairs) set inside the block, as they were after it."""
    saved = {name: os.environ.get(name) for name, _ in env}
    os.environ.update(dict(env))
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def positive_int(text: str) -> int | None:
    """`text` as a whole number >= 1, else None."""
    try:
        n = int(text)
    except ValueError:
        return None
    return n if n >= 1 else None


@lru_cache(maxsize=None)
def smallest_params(op: str) -> tuple:
    """The op strategy's minimal example (hypothesis shrinks to it; deterministic), as sorted items."""
    from hypothesis import HealthCheck, find, settings
    from kernelbench import registry
    spec = registry.get_op(op)
    p = find(spec.strategy(), lambda _: True, settings=settings(database=None, suppress_health_check=list(HealthCheck)))
    return tuple(sorted(p.items()))


def config_keys(op: str) -> set | None:
    """The config keys the op's kernels take: every key of every implementation's default config and config space
    over the op's 'tiny' and 'flash-tp8' cases (a space can offer keys its default at some shape lacks: mHC's
    RELOAD above one token, bf16_linear's NB at M = 1) and its declared `options` (keys only an explicit config
    sets), or None when none is known."""
    from kernelbench import registry
    try:
        impls = registry.impls(op)
    except LookupError:
        return None
    keys = _space_keys(op, tuple(sorted(impls)))
    return set(keys) if keys else None


@lru_cache(maxsize=None)
def _space_keys(op: str, impl_names: tuple) -> frozenset:
    from kernelbench import registry
    spec = registry.get_op(op)
    cases = [dict(_some_params(op))]
    for shape_set in ("tiny", "flash-tp8"):
        try:
            cases += spec.shape_cases(shape_set)
        except Exception:  # noqa: BLE001 - an op without cases in that set
            pass
    keys: set = set()
    for name in impl_names:
        impl = registry.get_impl(op, name)
        keys |= set(impl.options)
        for p in cases:
            try:
                if impl.default_config is not None:
                    keys |= set(impl.default_config(dict(p)))
                for cfg in impl.configs(dict(p)) if impl.configs is not None else ():
                    keys |= set(cfg)
            except Exception:  # noqa: BLE001 - a default or space that needs other params: not this case
                continue
    return frozenset(keys)


@lru_cache(maxsize=None)
def _cases_tiny(op: str) -> tuple:
    from kernelbench import registry
    try:
        cases = registry.get_op(op).shape_cases("tiny")
    except Exception:  # noqa: BLE001 - an op without tiny cases
        return ()
    return tuple(sorted(cases[0].items())) if cases else ()


def _some_params(op: str) -> dict:
    """A valid problem for the op: its first 'tiny' shape-set case (cheap), else the strategy's minimum."""
    return dict(_cases_tiny(op) or smallest_params(op))


INSPECT_WORKERS_ENV = "KERNELBENCH_INSPECT_WORKERS"


def check_environment() -> None:
    """The switches read from the environment while kernels, the decoder and the inspector run (KERNELBENCH_PDL,
    KERNELBENCH_STREAM_PRIORITY, KERNELBENCH_SHARED_SPLIT, KERNELBENCH_KV_LANE, KERNELBENCH_KV_LANE_FORK,
    KERNELBENCH_FP8_PROMOTE, KERNELBENCH_INSPECT_WORKERS), so that a bad value stops the command before any work
    instead of deep inside it."""
    from kernelbench.decoder.model import shared_split_from_env
    from kernelbench.decoder.trials import STEP_SETTINGS      # the step's settings, each with the function reading it
    for check in (*STEP_SETTINGS.values(), shared_split_from_env, lambda: env_positive_int(INSPECT_WORKERS_ENV)):
        check()


def check_settings() -> None:
    """Before any work: KERNELBENCH_PIN_CONFIG, KERNELBENCH_TUNED and the tuned-config file, against the registry;
    and the environment's other switches (check_environment)."""
    from kernelbench import registry, tuned_configs
    check_environment()
    try:
        tuned_configs.check_settings(known_ops={s.name for s in registry.ops()}, known_keys=config_keys)
    except tuned_configs.TuningError as e:
        raise UsageProblem(str(e)) from None


def check_shape_set(name: str | None) -> None:
    if name is None:
        return
    from kernelbench.config import get_shape_set
    try:
        get_shape_set(name)
    except ValueError as e:
        raise UsageProblem(f"--shapes: {e}") from None


def check_replay_params(op: str, params: dict) -> None:
    """A replayed example must name every parameter the op's strategy draws."""
    missing = sorted(set(dict(smallest_params(op))) - set(params))
    if missing:
        raise UsageProblem(f"--params for {op} lacks {', '.join(missing)} (it draws {', '.join(sorted(dict(smallest_params(op))))})")


def shape_set_option(ctx, param, value):
    """click callback for --shapes: a known shape set, else a usage error naming the known ones."""
    if value is None:
        return value
    from kernelbench.config import get_shape_set
    import click
    try:
        get_shape_set(value)
    except ValueError as e:
        raise click.BadParameter(str(e)) from None
    return value
