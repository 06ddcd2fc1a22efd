"""Opening the results database, and the small API every command writes through.

    from kernelbench.db.store import Store
    store = Store()                       # $KERNELBENCH_DB, else sqlite:///<data_dir>/kernelbench.sqlite
    store = Store("sqlite:///run.sqlite") # any SQLAlchemy URL (the CLI's --db)
    store = Store("postgresql://user:pw@host/kb")   # a shared store (needs kernelbench[postgres])
    env = store.environment_id(kernelbench.harness.fingerprint.fingerprint())   # get-or-create, returns the id
    impl = store.op_impl_id("fp8_linear", "triton", source_hash, family="linear", backend="triton")
    impl = store.impl_id(registry.get_impl("fp8_linear", "triton"))     # the same from a registry Impl
    store.add_bench_results([dict(environment_id=env, implementation_id=impl, ...)])
    store.bench_results(ops=["fp8_linear"], device="NVIDIA H200")   # the four-table join, as dicts

Opening migrates the database to the code's schema version (db/migrations.py). Errors are clear:
CorruptDatabase (not a SQLite file, or malformed), SchemaTooNew (written by a newer kernelbench),
NotAKernelbenchDatabase (someone else's tables). All derive from StoreError (db/errors.py).

Every read and write of the database outside db/ goes through a named Store method (bench results,
tune trials and choices, calibrations, verify runs and results, environments): no other module builds
rows or queries, and none imports SQLAlchemy.

Concurrency (SQLite): WAL journal, a 60 s busy timeout, and every transaction begins IMMEDIATE,
so writers queue instead of failing and two `kernelbench verify` processes on one file lose
nothing. Keep transactions short (one result or one batch), never a whole run, and call no Store
method inside an open `store.session()` block once it has executed a statement: each method runs
its own transaction, and SQLite's single writer would make it wait for the outer one (until the
busy timeout). Compute ids first (`store.impl_id(...)`), then open the session.

PostgreSQL (a store shared by a team or several CI runners): `postgresql://user:pw@host:5432/db`
picks the installed driver (psycopg 3, psycopg2 or pg8000; `pip install 'kernelbench[postgres]'`
installs psycopg 3), or name one (`postgresql+pg8000://...`). The database must exist; opening
creates and migrates the tables, under a transaction-scoped advisory lock so that runners opening
a fresh database at once migrate it once. Writers need nothing else: get-or-create retries on a
unique-key collision, every other write is an insert.
"""
from __future__ import annotations

import contextlib
import datetime as _dt
import os
import socket
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping

from sqlalchemy import create_engine, event, select, text
from sqlalchemy.engine import URL, Engine, make_url
from sqlalchemy.exc import ArgumentError, DatabaseError, IntegrityError, OperationalError
from sqlalchemy.orm import Session, sessionmaker

from kernelbench.db import migrations, schema
from kernelbench.db.errors import (CorruptDatabase, DuplicateResult, NotAKernelbenchDatabase,  # noqa: F401
                                   SchemaTooNew, StoreError)
from kernelbench.db.paths import data_dir

ENV_URL = "KERNELBENCH_DB"
BUSY_TIMEOUT_MS = 60_000
# Drivers tried, in order, for a PostgreSQL URL that names none: (SQLAlchemy dialect driver, module).
POSTGRES_DRIVERS = (("psycopg", "psycopg"), ("psycopg2", "psycopg2"), ("pg8000", "pg8000"))
POSTGRES_EXTRA = "pip install 'kernelbench[postgres]'"
MIGRATION_LOCK_KEY = 0x6B62_6D69   # PostgreSQL advisory lock id held while migrating ("kbmi")
# A running verify renews verify_run.heartbeat every HEARTBEAT_S; opening the store marks a 'running'
# run abandoned when its process is gone (same host and PID namespace: checked directly) or, from any
# other host or container, when its heartbeat is older than STALE_AFTER_S (ten missed beats: a margin
# for clock skew between hosts and a busy database).
HEARTBEAT_S = 60.0
STALE_AFTER_S = 600.0


def default_url() -> str:
    """$KERNELBENCH_DB, else the SQLite file kernelbench.sqlite in kernelbench.db.paths.data_dir()."""
    env = os.environ.get(ENV_URL)
    if env:
        return env
    return f"sqlite:///{data_dir() / 'kernelbench.sqlite'}"


def resolve_url(url: str) -> URL:
    """Parse a database URL; a PostgreSQL URL without a driver gets the first installed one."""
    try:
        parsed = make_url(url)
    except ArgumentError as e:
        raise StoreError(f"not a database URL: {url!r} ({e}); use e.g. sqlite:///path/kb.sqlite or "
                         f"postgresql://user@host/db") from None
    if parsed.drivername in ("postgres", "postgresql"):
        import importlib.util
        for driver, module in POSTGRES_DRIVERS:
            if importlib.util.find_spec(module) is not None:
                return parsed.set(drivername=f"postgresql+{driver}")
        raise StoreError(f"{parsed.render_as_string(hide_password=True)}: a PostgreSQL store needs a driver "
                         f"(psycopg, psycopg2 or pg8000): {POSTGRES_EXTRA}")
    return parsed


def _sqlite_setup(engine: Engine) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn, _record):
        dbapi_conn.isolation_level = None     # we issue BEGIN ourselves (below)
        cur = dbapi_conn.cursor()
        cur.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        cur.execute("PRAGMA foreign_keys = ON")
        if engine.url.database not in (None, "", ":memory:"):
            cur.execute("PRAGMA journal_mode = WAL")
            cur.execute("PRAGMA synchronous = FULL")
        cur.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn):
        # IMMEDIATE takes the write lock up front: a deferred transaction that reads then writes can
        # fail with SQLITE_BUSY without waiting when another process committed in between.
        conn.exec_driver_sql("BEGIN IMMEDIATE")


def _describe(url) -> str:
    return url.database if url.get_backend_name() == "sqlite" and url.database else url.render_as_string(hide_password=True)


class Store:
    """The results database at `url` (default: default_url()), migrated on open unless migrate=False."""

    def __init__(self, url: str | None = None, *, migrate: bool = True, echo: bool = False):
        self.url = url or default_url()
        parsed = resolve_url(self.url)
        self.is_sqlite = parsed.get_backend_name() == "sqlite"
        self.is_postgresql = parsed.get_backend_name() == "postgresql"
        self.where = _describe(parsed)
        if self.is_sqlite and parsed.database not in (None, "", ":memory:"):
            path = Path(parsed.database)
            if path.is_dir():
                raise StoreError(f"database path {path} is a directory, not a file")
            path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self.engine = create_engine(parsed, echo=echo, future=True, pool_pre_ping=not self.is_sqlite)
        except ModuleNotFoundError as e:  # a driver named in the URL that is not installed
            extra = f"; {POSTGRES_EXTRA}" if parsed.get_backend_name() == "postgresql" else ""
            raise StoreError(f"cannot open database {self.where}: driver module {e.name!r} is not installed{extra}") \
                from None
        except Exception as e:  # unknown dialect
            raise StoreError(f"cannot open database {self.where}: {e}") from None
        if self.is_sqlite:
            _sqlite_setup(self.engine)
        self._sessions = sessionmaker(self.engine, expire_on_commit=False)
        self._check()
        if migrate:
            self.migrate()
            self.mark_abandoned_runs()

    # opening ------------------------------------------------------------------------------
    def _wrap(self, e: Exception) -> StoreError:
        msg = str(getattr(e, "orig", e)).strip()
        if not self.is_sqlite:
            return StoreError(f"database {self.where}: {msg}")
        if isinstance(e, DatabaseError) and not isinstance(e, (OperationalError, IntegrityError)) or \
                "not a database" in msg or "malformed" in msg:
            return CorruptDatabase(f"the database {self.where} is corrupt or not a SQLite file ({msg}); move it "
                                   f"aside (keep it for recovery) or point --db / {ENV_URL} at another file")
        return StoreError(f"database {self.where}: {msg}")

    def _check(self) -> None:
        if not self.is_sqlite:
            try:
                with self.engine.connect():
                    pass
            except Exception as e:  # noqa: BLE001 - refused, unknown host, bad password, no such database
                raise StoreError(f"cannot connect to {self.where}: {str(getattr(e, 'orig', e)).strip()}") from None
            return
        try:
            with self.engine.connect() as conn:
                res = conn.exec_driver_sql("PRAGMA quick_check(1)").scalar()
        except DatabaseError as e:
            raise self._wrap(e) from None
        if res != "ok":
            raise CorruptDatabase(f"the database {self.where} failed SQLite's integrity check ({res}); move it aside "
                                  f"(keep it for recovery) or point --db / {ENV_URL} at another file")

    def migrate(self, migration_list: list[migrations.Migration] | None = None) -> list[int]:
        """Bring the database to the latest schema version; returns the versions applied."""
        try:
            with self.engine.begin() as conn:
                if self.is_postgresql:   # one migrator at a time; released at commit
                    conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": MIGRATION_LOCK_KEY})
                return migrations.upgrade(conn, migration_list)
        except StoreError:
            raise
        except DatabaseError as e:
            raise self._wrap(e) from None

    def version(self) -> int | None:
        with self.engine.connect() as conn:
            return migrations.current_version(conn)

    # sessions -----------------------------------------------------------------------------
    @contextlib.contextmanager
    def session(self) -> Iterator[Session]:
        """A unit of work: committed when the block ends, rolled back if it raises."""
        with self._sessions() as s:
            try:
                with s.begin():
                    yield s
            except DatabaseError as e:
                if isinstance(e, IntegrityError):
                    raise
                raise self._wrap(e) from e

    def get_or_create(self, model, lookup: Mapping[str, Any], defaults: Mapping[str, Any] | None = None) -> int:
        """The id of the row of `model` matching `lookup`, inserting it (with `defaults`) if absent.
        Safe against a concurrent insert of the same row."""
        for _ in range(3):
            with self.session() as s:
                found = s.scalars(select(model.id).filter_by(**lookup)).first()
                if found is not None:
                    return found
                try:
                    with s.begin_nested():
                        row = model(**lookup, **(defaults or {}))
                        s.add(row)
                        s.flush()
                        return row.id
                except IntegrityError:
                    continue  # someone inserted it between our select and insert (non-SQLite backends)
        raise StoreError(f"could not get or create {model.__tablename__} {dict(lookup)}")

    # keys ---------------------------------------------------------------------------------
    def environment_id(self, fp: Mapping[str, Any]) -> int:
        """Get-or-create the environment row of a fingerprint (kernelbench.harness.fingerprint.fingerprint())."""
        cols = {c.name for c in schema.Environment.__table__.columns} - {"id", "created"}
        fields = {k: v for k, v in fp.items() if k in cols}
        if "fingerprint" not in fields:
            from kernelbench.harness.fingerprint import fingerprint_hash
            fields["fingerprint"] = fingerprint_hash(fp)
        extra_keys = set(fp) - cols
        if extra_keys and fields.get("extra") is None:
            fields["extra"] = {k: fp[k] for k in sorted(extra_keys)}
        return self.get_or_create(schema.Environment, {"fingerprint": fields.pop("fingerprint")}, fields)

    def op_id(self, name: str, family: str = "") -> int:
        return self.get_or_create(schema.Op, {"name": name}, {"family": family})

    def op_impl_id(self, op: str, impl: str, source_hash: str, *, family: str = "", backend: str = "",
                   source: str = "") -> int:
        """Get-or-create the implementation row (op, impl, source_hash), and its op row."""
        op_id = self.op_id(op, family)
        return self.get_or_create(schema.Implementation, {"op_id": op_id, "name": impl, "source_hash": source_hash},
                                  {"backend": backend, "source": source})

    def impl_id(self, impl) -> int:
        """op_impl_id for a registry Impl (kernelbench.registry.Impl)."""
        from kernelbench import registry
        family = registry.get_op(impl.op).family
        return self.op_impl_id(impl.op, impl.name, impl.source_hash, family=family, backend=impl.backend,
                               source=impl.source)

    # verify ------------------------------------------------------------------------------
    def start_verify_run(self, environment_id: int, **fields: Any) -> int:
        """A verify_run row in status 'running'; fields: profile, device, shape_set, command, git_commit
        (host and pid default to this process)."""
        fields.setdefault("host", process_scope())
        fields.setdefault("pid", os.getpid())
        fields.setdefault("heartbeat", schema.utcnow())
        with self.session() as s:
            run = schema.VerifyRun(environment_id=environment_id, status="running", n_results=0, n_failed=0, **fields)
            s.add(run)
            s.flush()
            return run.id

    def add_verify_result(self, run_id: int, implementation_id: int, **fields: Any) -> int:
        """One verify_result row (params, value_mode, seed, source, passed, stats, failure, repro,
        elapsed_s), committed at once, and the run's counters."""
        with self.session() as s:
            row = schema.VerifyResult(run_id=run_id, implementation_id=implementation_id, **fields)
            s.add(row)
            run = s.get(schema.VerifyRun, run_id)
            run.n_results += 1
            run.n_failed += 0 if fields.get("passed") else 1
            run.heartbeat = schema.utcnow()
            s.flush()
            return row.id

    def finish_verify_run(self, run_id: int, status: str) -> None:
        with self.session() as s:
            run = s.get(schema.VerifyRun, run_id)
            run.status = status
            run.finished = schema.utcnow()

    def heartbeat(self, run_id: int) -> None:
        """A sign of life of a running verify run (see HEARTBEAT_S)."""
        with self.session() as s:
            run = s.get(schema.VerifyRun, run_id)
            if run is not None and run.status == "running":
                run.heartbeat = schema.utcnow()

    @contextlib.contextmanager
    def keep_alive(self, run_id: int, every_s: float | None = None) -> Iterator[None]:
        """Renew the run's heartbeat from a background thread every `every_s` (HEARTBEAT_S) while the
        block runs: a long example or compile between results still shows the run is alive."""
        import threading
        stop = threading.Event()

        def beat() -> None:
            while not stop.wait(every_s or HEARTBEAT_S):
                try:
                    self.heartbeat(run_id)
                except Exception:  # noqa: BLE001 - a busy or vanished database: try again next beat
                    pass
        t = threading.Thread(target=beat, name=f"kernelbench-heartbeat-{run_id}", daemon=True)
        t.start()
        try:
            yield
        finally:
            stop.set()
            t.join(timeout=5.0)

    def mark_abandoned_runs(self) -> list[int]:
        """'running' runs that will never finish become 'abandoned': a run of this host and PID
        namespace whose process is gone (killed: no `finally` ran), and a run of any other host or
        container whose heartbeat (its start, for rows from before heartbeats) is older than
        STALE_AFTER_S."""
        here = process_scope()
        stale = schema.utcnow() - _dt.timedelta(seconds=STALE_AFTER_S)
        try:
            with self.session() as s:
                runs = s.scalars(select(schema.VerifyRun).where(schema.VerifyRun.status == "running")).all()
                gone = [r for r in runs
                        if (not _process_alive(r.pid, r.started) if r.host == here and r.pid is not None
                            else (r.heartbeat or r.started) < stale)]
                for r in gone:
                    r.status = "abandoned"
                    r.finished = schema.utcnow()
                return [r.id for r in gone]
        except StoreError:   # a read-only database: leave the rows as they are
            return []

    def verify_results(self, run_id: int) -> list[dict]:
        """A run's results as dicts (op, impl, params, value_mode, passed, stats, failure, repro, ...)."""
        with self.session() as s:
            rows = s.execute(select(schema.VerifyResult, schema.Implementation, schema.Op)
                             .join(schema.Implementation, schema.VerifyResult.implementation_id == schema.Implementation.id)
                             .join(schema.Op, schema.Implementation.op_id == schema.Op.id)
                             .where(schema.VerifyResult.run_id == run_id).order_by(schema.VerifyResult.id)).all()
            return [{"id": r.id, "op": o.name, "impl": i.name, "source_hash": i.source_hash, "params": r.params,
                     "value_mode": r.value_mode, "seed": r.seed, "source": r.source, "layout": r.layout, "passed": r.passed,
                     "stats": r.stats, "failure": r.failure, "repro": r.repro, "elapsed_s": r.elapsed_s}
                    for r, i, o in rows]

    # bench -------------------------------------------------------------------------------
    def add_bench_results(self, rows: Iterable[Mapping[str, Any]]) -> int:
        """bench_result rows (dicts of its columns: environment_id, implementation_id, shape_label, params,
        config, method, median_us, ...) in one transaction -> rows written. DuplicateResult when one
        repeats a stored (environment, implementation, params, config, commit, run tag)."""
        n = 0
        try:
            with self.session() as s:
                for r in rows:
                    s.add(schema.BenchResult(**r))
                    n += 1
        except IntegrityError as e:
            raise DuplicateResult(f"bench result already stored: {str(getattr(e, 'orig', e)).strip()}") from e
        return n

    def newest_bench_run_tag(self) -> str | None:
        B = schema.BenchResult
        with self.session() as s:
            return s.execute(select(B.run_tag).order_by(B.created.desc(), B.id.desc()).limit(1)).scalar()

    def bench_results(self, *, ops: Iterable[str] | None = None, impl: str | None = None, device: str | None = None,
                      commit: str | None = None, run_tag: str | None = None) -> list[dict]:
        """Bench results joined with their implementation, op and environment, oldest first (created, id),
        as dicts: the bench_result columns plus op, impl, source_hash, label (shape_label), device (the
        environment's GPU name) and extra ({} when empty). Filters: op names, implementation name, GPU
        name, git commit prefix, run tag."""
        B, I, O, E = schema.BenchResult, schema.Implementation, schema.Op, schema.Environment
        q = (select(B, I, O, E).join(I, B.implementation_id == I.id).join(O, I.op_id == O.id)
             .join(E, B.environment_id == E.id).order_by(B.created, B.id))
        if ops is not None:
            q = q.where(O.name.in_(list(ops)))
        if impl:
            q = q.where(I.name == impl)
        if device:
            q = q.where(E.gpu_name == device)
        if commit:
            q = q.where(B.git_commit.like(f"{commit}%"))
        if run_tag is not None:
            q = q.where(B.run_tag == run_tag)
        cols = [c.name for c in B.__table__.columns]
        with self.session() as s:
            return [{**{c: getattr(b, c) for c in cols}, "op": o.name, "impl": i.name, "source_hash": i.source_hash,
                     "label": b.shape_label, "device": e.gpu_name, "extra": b.extra or {}}
                    for b, i, o, e in s.execute(q).all()]

    # tune --------------------------------------------------------------------------------
    def tune_trials(self, environment_id: int, implementation_id: int, shape_key: Mapping) -> list[dict]:
        """The tune_trial rows of one (environment, implementation, shape key), as dicts of their columns."""
        T = schema.TuneTrial
        cols = [c.name for c in T.__table__.columns]
        with self.session() as s:
            rows = s.scalars(select(T).where(T.environment_id == environment_id,
                                             T.implementation_id == implementation_id,
                                             T.shape_key == shape_key)).all()
            return [{c: getattr(r, c) for c in cols} for r in rows]

    def add_tune_trial(self, **fields: Any) -> None:
        """One tune_trial row (environment_id, implementation_id, shape_key, config, status, reason,
        median_us, samples, git_commit)."""
        with self.session() as s:
            s.add(schema.TuneTrial(**fields))

    def add_tune_choice(self, **fields: Any) -> None:
        """One tune_choice row (environment_id, op_id, implementation_id, shape_key, config, median_us,
        git_commit)."""
        with self.session() as s:
            s.add(schema.TuneChoice(**fields))

    # calibration -------------------------------------------------------------------------
    def add_calibrations(self, rows: Iterable[Mapping[str, Any]]) -> None:
        """calibration rows (environment_id, measure, value, unit, samples, method, git_commit), one transaction."""
        with self.session() as s:
            for r in rows:
                s.add(schema.Calibration(**r))

    def newest_calibrations(self, environment_id: int | None = None, gpu_name: str | None = None) -> dict[str, float]:
        """The newest value of each measure for an environment (or any environment of a GPU name, or all)."""
        C, E = schema.Calibration, schema.Environment
        q = select(C).join(E, C.environment_id == E.id).order_by(C.created)
        if environment_id is not None:
            q = q.where(C.environment_id == environment_id)
        elif gpu_name is not None:
            q = q.where(E.gpu_name == gpu_name)
        with self.session() as s:
            return {c.measure: c.value for c in s.scalars(q).all()}

    # environments ------------------------------------------------------------------------
    def environment(self, environment_id: int) -> dict:
        """The environment row's columns as a dict ({} when there is none)."""
        with self.session() as s:
            e = s.get(schema.Environment, environment_id)
            return {c.name: getattr(e, c.name) for c in schema.Environment.__table__.columns} if e else {}

    # verify outcomes ---------------------------------------------------------------------
    def verify_outcomes(self, *, op: str | None = None, impl: str | None = None, source_hash: str | None = None,
                        device: str | None = None) -> list[dict]:
        """Every verify_result's outcome with its run and environment, as dicts: op, impl, run_id, passed,
        stats, started, device (the run's: "cpu" or "cuda"), gpu_name, git_commit. Filters: op,
        implementation name and source hash, run device."""
        R, V, I, O, E = (schema.VerifyResult, schema.VerifyRun, schema.Implementation, schema.Op,
                         schema.Environment)
        q = (select(O.name, I.name, R.run_id, R.passed, R.stats, V.started, V.device, E.gpu_name, V.git_commit)
             .join(I, R.implementation_id == I.id).join(O, I.op_id == O.id).join(V, R.run_id == V.id)
             .outerjoin(E, V.environment_id == E.id))
        if op is not None:
            q = q.where(O.name == op)
        if impl is not None:
            q = q.where(I.name == impl)
        if source_hash is not None:
            q = q.where(I.source_hash == source_hash)
        if device is not None:
            q = q.where(V.device == device)
        keys = ("op", "impl", "run_id", "passed", "stats", "started", "device", "gpu_name", "git_commit")
        with self.session() as s:
            return [dict(zip(keys, row)) for row in s.execute(q).all()]

    def dispose(self) -> None:
        self.engine.dispose()

    def __repr__(self) -> str:
        return f"Store({self.where!r})"


def process_scope() -> str:
    """Where a pid identifies a process: the host name, plus the PID namespace on Linux (containers on
    one host share a host name but not their pids)."""
    try:
        ns = os.readlink("/proc/self/ns/pid")
    except OSError:
        return socket.gethostname()
    return f"{socket.gethostname()} {ns}"


def _process_alive(pid: int, started) -> bool:
    """Whether process `pid` exists and is not a newer process that reused the number (Linux: its
    start time from /proc must not be after the run's start)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:   # exists, another user's
        pass
    except OSError:
        return True
    try:
        import time
        ticks = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19])
        uptime = float(Path("/proc/uptime").read_text().split()[0])
        proc_start = time.time() - uptime + ticks / os.sysconf("SC_CLK_TCK")
        run_start = started.replace(tzinfo=_dt.timezone.utc).timestamp() if started.tzinfo is None else started.timestamp()
        return proc_start <= run_start + 2.0
    except (OSError, ValueError, IndexError, AttributeError):
        return True


def raw_execute(store: Store, sql: str) -> list:
    """Run one raw SQL statement as the driver sees it (no bind parameters; debugging, tests)."""
    with store.engine.begin() as conn:
        res = conn.exec_driver_sql(sql)
        return list(res) if res.returns_rows else []
