"""Hypothesis profiles. `ci`: derandomized, no example database, so CI cannot flake. `explore`: more
examples and the example database, so a failure found once is replayed first next time; this is
what `kernelbench verify` runs for users."""
from __future__ import annotations

from hypothesis import HealthCheck, settings
from hypothesis.database import DirectoryBasedExampleDatabase

from kernelbench.db.paths import data_dir


_SUPPRESS = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much]

settings.register_profile("ci", derandomize=True, database=None, deadline=None, max_examples=12,
                          suppress_health_check=_SUPPRESS, print_blob=True)


def explore_settings(max_examples: int = 100) -> settings:
    return settings(deadline=None, max_examples=max_examples, suppress_health_check=_SUPPRESS, print_blob=True,
                    database=DirectoryBasedExampleDatabase(str(data_dir() / "hypothesis")))
