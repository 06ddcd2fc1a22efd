"""Where kernelbench keeps user data: the default database and the hypothesis example database."""
from __future__ import annotations

import os
from pathlib import Path


def data_dir() -> Path:
    """$KERNELBENCH_HOME, else $XDG_DATA_HOME/kernelbench, else ~/.local/share/kernelbench."""
    env = os.environ.get("KERNELBENCH_HOME")
    if env:
        return Path(env)
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "kernelbench"
