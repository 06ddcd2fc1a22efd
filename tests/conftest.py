import os

import pytest
import torch
from hypothesis import settings

import kernelbench.profiles  # noqa: F401  (registers the profiles)

settings.load_profile(os.environ.get("KB_HYPOTHESIS_PROFILE", "ci"))

HAS_CUDA = torch.cuda.is_available()


def pytest_collection_modifyitems(config, items):
    slow_ok = os.environ.get("KB_SLOW") == "1"
    for item in items:
        if "gpu" in item.keywords and not HAS_CUDA:
            item.add_marker(pytest.mark.skip(reason="needs a CUDA GPU; runs on the device machine (scripts/device_all.sh)"))
        if "slow" in item.keywords and not slow_ok:
            item.add_marker(pytest.mark.skip(reason="slow check: opt in with KB_SLOW=1"))


@pytest.fixture
def gen():
    return torch.Generator().manual_seed(1234)


@pytest.fixture(scope="session")
def postgres_server():
    """A throwaway PostgreSQL server for this test session (tests/_postgres.py), or a skip saying why."""
    from _postgres import Server
    server = Server()
    yield server
    server.stop()


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request, tmp_path):
    """A fresh empty database on each backend: a SQLite file, and a database on the test PostgreSQL server."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'kb.sqlite'}"
    return request.getfixturevalue("postgres_server").create_database()
