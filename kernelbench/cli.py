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


class LazyGroup(click.Group):
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


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="kernelbench")
def main():
    """Verify, time, tune and regression-test DeepSeek-V4 decode kernels."""


if __name__ == "__main__":
    main()
