"""A throwaway PostgreSQL server for the tests: initdb + pg_ctl in a temporary folder, on a free
localhost port, fsync off. The binaries come from PATH, the system's /usr/lib/postgresql/*/bin, or
the `pgserver` wheel (PyPI) when installed. Root may not run postgres, so under root the server
runs as the `postgres` (else `nobody`) user. Each test gets its own fresh database on the server.

When no server can start the tests skip with the reason, unless KB_REQUIRE_POSTGRES=1 (CI sets it),
where that is a failure: CI must never pass with the PostgreSQL tests silently gone.
"""
from __future__ import annotations

import glob
import importlib.util
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import uuid
from pathlib import Path

import pytest

REQUIRED = os.environ.get("KB_REQUIRE_POSTGRES") == "1"


def unavailable(reason: str):
    if REQUIRED:
        pytest.fail(f"KB_REQUIRE_POSTGRES=1 but {reason}", pytrace=False)
    pytest.skip(reason)


def bin_dir() -> Path | None:
    found = shutil.which("initdb")
    candidates = [Path(found).resolve().parent] if found else []
    candidates += [Path(p) for p in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True)]
    spec = importlib.util.find_spec("pgserver")
    if spec is not None and spec.submodule_search_locations:
        candidates += [Path(p) / "pginstall" / "bin" for p in spec.submodule_search_locations]
    for c in candidates:
        if (c / "initdb").exists() and (c / "pg_ctl").exists():
            return c
    return None


def _run_as() -> str | None:
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        try:
            pwd.getpwnam(name)
            return name
        except KeyError:
            continue
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """A running server; `url(db)` is a SQLAlchemy URL, `create_database()` a fresh database's URL."""

    def __init__(self):
        if importlib.util.find_spec("psycopg") is None:
            unavailable("the PostgreSQL tests need the psycopg driver: pip install 'kernelbench[postgres]'")
        bins = bin_dir()
        if bins is None:
            unavailable("no PostgreSQL server binaries (initdb, pg_ctl) on PATH, in /usr/lib/postgresql or from "
                        "the pgserver wheel: apt-get install postgresql, or pip install pgserver")
        self.bins, self.user = bins, _run_as()
        self.root = Path(tempfile.mkdtemp(prefix="kb-pg-"))
        self.data, self.log = self.root / "data", self.root / "server.log"
        if self.user:
            uid = pwd.getpwnam(self.user)
            os.chown(self.root, uid.pw_uid, uid.pw_gid)
        try:
            self._pg("initdb", "-D", str(self.data), "-U", "kb", "--auth=trust", "-E", "UTF8", "--no-sync")
            for attempt in range(3):   # a free port can be taken before the server binds it (pytest-xdist workers)
                self.port = _free_port()
                try:
                    self._pg("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-w", "-t", "60", "-o",
                             f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off "
                             f"-c synchronous_commit=off -c full_page_writes=off -c max_connections=100", "start")
                    break
                except subprocess.CalledProcessError:
                    if attempt == 2:
                        raise
        except (subprocess.CalledProcessError, OSError) as e:
            detail = getattr(e, "stderr", "") or ""
            log = self.log.read_text(errors="replace")[-500:] if self.log.exists() else ""
            shutil.rmtree(self.root, ignore_errors=True)
            unavailable(f"PostgreSQL did not start from {bins}: {e} {detail[-500:]} {log}")

    def _pg(self, exe: str, *args: str) -> None:
        subprocess.run([str(self.bins / exe), *args], check=True, capture_output=True, text=True, timeout=120,
                       user=self.user, cwd=self.root)

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://kb@127.0.0.1:{self.port}/{database}"

    def create_database(self) -> str:
        import psycopg
        name = f"kb_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(f"host=127.0.0.1 port={self.port} user=kb dbname=postgres", autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")
        return self.url(name)

    def stop(self) -> None:
        try:
            self._pg("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")
        except (subprocess.CalledProcessError, OSError, subprocess.TimeoutExpired):
            pass
        shutil.rmtree(self.root, ignore_errors=True)
