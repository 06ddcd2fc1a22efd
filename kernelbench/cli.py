"""The `kernelbench` command line. Commands are thin click wrappers over importable functions; each
lives in kernelbench/commands/<name>.py and exposes `command`. They are imported lazily so that
`kernelbench list` does not pay for everything else."""
from __future__ import annotations

import importlib

import click

COMMANDS = {
    "list": "list_ops",
    "verify": "verify",
    "bench": "bench",
    "tune": "tune",
    "calibrate": "calibrate",
    "roofline": "roofline",
    "inspect": "inspect_cmd",
    "history": "history",
    "export": "export",
    "gate": "gate",
    "scaling": "scaling",
    "generate": "generate",
    "decode-bench": "decode_bench",
    "make-checkpoint": "make_checkpoint",
    "report": "report",
    "fidelity": "fidelity",
}


def usage_message(e: BaseException) -> str | None:
    """The one-line message of a usage error (a bad checkpoint, model config, tuning setting or
    option value), or None for anything else (a real bug keeps its traceback)."""
    import sys
    kinds = []
    for module, name in (("kernelbench.decoder.checkpoint", "CheckpointError"), ("kernelbench.config", "ConfigError"),
                         ("kernelbench.tuned_configs", "TuningError"), ("kernelbench.usage", "UsageProblem")):
        mod = sys.modules.get(module)
        if mod is not None and hasattr(mod, name):
            kinds.append(getattr(mod, name))
    return str(e) if kinds and isinstance(e, tuple(kinds)) else None


class LazyGroup(click.Group):
    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except Exception as e:   # noqa: BLE001 - re-raised unless it is a usage error
            msg = usage_message(e)
            if msg is None:
                raise
            raise click.ClickException(msg) from None

    def list_commands(self, ctx):
        return sorted(COMMANDS)

    def get_command(self, ctx, name):
        module = COMMANDS.get(name)
        if module is None:
            return None
        try:
            return importlib.import_module(f"kernelbench.commands.{module}").command
        except ModuleNotFoundError as e:
            if e.name == f"kernelbench.commands.{module}":
                return None
            raise
        except Exception as e:   # noqa: BLE001 - a usage error at import (an environment switch the kernels read)
            msg = usage_message(e)
            if msg is None:
                raise
            raise click.ClickException(msg) from None


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="kernelbench")
def main():
    """Verify, time, tune and regression-test DeepSeek-V4 decode kernels."""


if __name__ == "__main__":
    main()
