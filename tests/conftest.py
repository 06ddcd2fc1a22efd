import os

import pytest
import torch
from hypothesis import settings

import kernelbench.profiles  # noqa: F401  (registers the profiles)

# "ci-upper": the ci profile with 4 examples for hypothesis tests that do not set their own count; .ci/run's
# second step uses it to rerun the kernel tests at the upper Triton end (the first step draws the full count)
settings.register_profile("ci-upper", parent=settings.get_profile("ci"), max_examples=4)
settings.load_profile(os.environ.get("KB_HYPOTHESIS_PROFILE", "ci"))

HAS_CUDA = torch.cuda.is_available()


def pytest_collection_modifyitems(config, items):
    slow_ok = os.environ.get("KB_SLOW") == "1"
    for item in items:
        if "gpu" in item.keywords and not HAS_CUDA:
            item.add_marker(pytest.mark.skip(reason="needs a CUDA GPU; runs on the device machine (scripts/device_all.sh)"))
        if "slow" in item.keywords and not slow_ok:
            item.add_marker(pytest.mark.skip(reason="slow check: opt in with KB_SLOW=1"))


@pytest.fixture(scope="session", autouse=True)
def _isolated_user_data(tmp_path_factory):
    """Tests never touch the real user data directory (results database, hypothesis example
    database): KERNELBENCH_HOME and KERNELBENCH_DB point into pytest's temporary directory, which
    pytest prunes (it keeps the last three runs)."""
    home = tmp_path_factory.mktemp("kernelbench-home")
    saved = {k: os.environ.get(k) for k in ("KERNELBENCH_HOME", "KERNELBENCH_DB")}
    os.environ["KERNELBENCH_HOME"] = str(home)
    os.environ["KERNELBENCH_DB"] = f"sqlite:///{home / 'kernelbench.sqlite'}"
    yield home
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


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
