"""What opening or using the results database can raise. All derive from StoreError. A module of its
own so that migrations.py and store.py both import it (neither imports the other's errors late)."""
from __future__ import annotations


class StoreError(RuntimeError):
    """Any problem opening or using the results database."""


class CorruptDatabase(StoreError):
    pass


class SchemaTooNew(StoreError):
    pass


class NotAKernelbenchDatabase(StoreError):
    pass


class DuplicateResult(StoreError):
    """A result row whose unique key (e.g. environment, implementation, params, config, commit, run tag
    of a bench_result) is already stored."""
