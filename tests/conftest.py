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

# Under pytest-xdist (scripts/test.sh runs `-n auto --dist loadgroup`) each worker is a process of its own:
# it gets its own pytest temporary folder (so KERNELBENCH_HOME / KERNELBENCH_DB below, tmp_path and the
# PostgreSQL server of tests/_postgres.py are per worker) and its share of the cores, so that W workers
# each running torch's intra-op pool on every core do not oversubscribe the machine (also for the
# subprocesses a test starts, through OMP_NUM_THREADS).
_WORKERS = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "0"))
if _WORKERS > 1:
    _cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    _threads = str(max(1, _cores // _WORKERS))
    os.environ.setdefault("OMP_NUM_THREADS", _threads)
    torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))


def _shared_fixture_group(item) -> str | None:
    """The test module's name when the test uses a class-, module- or package-scoped fixture defined in a
    test module: such a fixture is built once per worker that runs one of its tests, so with xdist these
    tests are kept on one worker (`xdist_group`, honoured by --dist loadgroup) rather than paying for it twice.
    Session fixtures of this conftest (the PostgreSQL server: about 2 s) are simply built once per worker."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return None
    for name in item.fixturenames:
        for fd in info.name2fixturedefs.get(name, ()):
            if fd.scope in ("class", "module", "package") and fd.baseid.split("::")[0].endswith(".py"):
                return fd.baseid.split("::")[0].rsplit("/", 1)[-1].removesuffix(".py")
    return None


@pytest.hookimpl(tryfirst=True)     # before xdist's own hook reads the xdist_group marks
def pytest_collection_modifyitems(config, items):
    slow_ok = os.environ.get("KB_SLOW") == "1"
    xdist = config.pluginmanager.hasplugin("xdist")       # registers the xdist_group mark
    for item in items:
        group = _shared_fixture_group(item) if xdist else None
        if group and not item.get_closest_marker("xdist_group"):
            item.add_marker(pytest.mark.xdist_group(group))
        if "gpu" in item.keywords and not HAS_CUDA:
            item.add_marker(pytest.mark.skip(reason="needs a CUDA GPU; runs on the device machine (scripts/device_gpu_tests.sh)"))
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
