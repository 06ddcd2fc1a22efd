"""Optional dependencies, installed as pyproject extras, with a clear message when one is missing.

    plot      matplotlib: the --png plots of roofline, history and scaling
    postgres  psycopg 3: a PostgreSQL store (--db postgresql://...; kernelbench.db.store)
    pytest    pytest-benchmark: the kernel_bench fixture (kernelbench.pytest_plugin)
"""
from __future__ import annotations

import click


class MissingExtra(click.ClickException):
    """An optional dependency is not installed (a one-line error on the command line too)."""


def pyplot():
    """matplotlib.pyplot on the file-only Agg backend."""
    try:
        import matplotlib
    except ModuleNotFoundError:
        raise MissingExtra("plots need matplotlib, which is not installed: pip install 'kernelbench[plot]'") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def pytest_benchmark_stats():
    """pytest-benchmark's Stats class (the statistics its JSON carries)."""
    try:
        from pytest_benchmark.stats import Stats
    except ModuleNotFoundError:
        raise MissingExtra("this needs pytest-benchmark, which is not installed: pip install 'kernelbench[pytest]'") \
            from None
    return Stats
