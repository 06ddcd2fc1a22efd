"""Progress for long commands (issue 10, item 12): a rich bar on a terminal, one line per item in a
log (CI, a redirected job), always on stderr so --json output stays clean.

    with steps("tune", total=len(problems)) as advance:
        for p in problems:
            ...
            advance(f"{op} {label}")          # one item done; the label says which
"""
from __future__ import annotations

import contextlib
import time
from typing import Callable, Iterator


@contextlib.contextmanager
def steps(what: str, total: int | None, enabled: bool = True, console=None) -> Iterator[Callable[[str], None]]:
    if not enabled:
        yield lambda label="": None
        return
    from rich.console import Console
    console = console or Console(stderr=True)
    t0 = time.monotonic()
    if not console.is_terminal:
        state = {"n": 0}

        def log(label: str = "") -> None:
            state["n"] += 1
            of = f"/{total}" if total else ""
            console.print(f"{what} [{state['n']}{of}] {label} ({time.monotonic() - t0:.0f} s)", highlight=False,
                          markup=False)
        yield log
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, \
        TimeRemainingColumn
    bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                   TextColumn("eta"), TimeRemainingColumn(), TextColumn("{task.fields[last]}"), console=console,
                   transient=True)
    with bar:
        task = bar.add_task(what, total=total, last="")

        def advance(label: str = "") -> None:
            bar.update(task, advance=1, last=label)
        yield advance
