"""Versioned schema migrations, applied in order and recorded in the `schema_version` table.

A database is built only by migrations: a new file runs 1, 2, ... N, an old one runs the ones it
lacks, in one transaction (BEGIN IMMEDIATE on SQLite, so two processes opening a fresh file at once
cannot both migrate it). tests/test_db.py checks that the migrated tables and columns are exactly
those of db/schema.py, so a schema change without its migration fails the tests.

To change the schema: edit db/schema.py, then append `Migration(N + 1, "what", fn)` to MIGRATIONS,
where fn(conn) issues the DDL that turns version N into N + 1 (`op_add_column` helps). Never edit a
migration that has shipped: the frozen v1 tables below are what version 1 was.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from sqlalchemy import (BigInteger, Boolean, Column, DateTime, Float, ForeignKey, Index, Integer, MetaData, String,
                        Table, Text, UniqueConstraint, inspect, text)
from sqlalchemy.engine import Connection
from sqlalchemy.schema import AddConstraint, CreateColumn  # noqa: F401  (for future migrations)

from kernelbench.db.errors import NotAKernelbenchDatabase, SchemaTooNew
from kernelbench.db.schema import utcnow

VERSION_TABLE = "schema_version"


@dataclass(frozen=True)
class Migration:
    version: int
    description: str
    apply: Callable[[Connection], None]


def _v1_metadata() -> MetaData:
    """The schema as version 1 shipped it (frozen; later versions change it by migrations)."""
    md = MetaData()

    def created():
        return Column("created", DateTime, nullable=False)

    Table("environment", md,
          Column("id", Integer, primary_key=True),
          Column("fingerprint", String(64), nullable=False, unique=True),
          Column("device_type", String(16), nullable=False),
          Column("gpu_name", String(128), nullable=False),
          Column("compute_capability", String(16), nullable=False),
          Column("sm_count", Integer, nullable=False),
          Column("l2_bytes", BigInteger, nullable=False),
          Column("memory_bytes", BigInteger, nullable=False),
          *(Column(n, String(w), nullable=False) for n, w in (
              ("driver", 64), ("cuda", 32), ("torch", 64), ("triton", 64), ("python", 32), ("hostname", 255),
              ("cpu", 255), ("git_commit", 64))),
          Column("extra", Text, nullable=True),
          created())
    Table("op", md,
          Column("id", Integer, primary_key=True),
          Column("name", String(128), nullable=False, unique=True),
          Column("family", String(64), nullable=False))
    Table("implementation", md,
          Column("id", Integer, primary_key=True),
          Column("op_id", Integer, ForeignKey("op.id"), nullable=False),
          Column("name", String(128), nullable=False),
          Column("source_hash", String(64), nullable=False),
          Column("backend", String(32), nullable=False),
          Column("source", String(255), nullable=False),
          created(),
          UniqueConstraint("op_id", "name", "source_hash", name="uq_implementation"))
    Table("verify_run", md,
          Column("id", Integer, primary_key=True),
          Column("environment_id", Integer, ForeignKey("environment.id"), nullable=False),
          Column("started", DateTime, nullable=False),
          Column("finished", DateTime, nullable=True),
          Column("profile", String(32), nullable=False),
          Column("device", String(16), nullable=False),
          Column("shape_set", String(64), nullable=False),
          Column("command", Text, nullable=False),
          Column("status", String(16), nullable=False),
          Column("git_commit", String(64), nullable=False),
          Column("n_results", Integer, nullable=False),
          Column("n_failed", Integer, nullable=False))
    Table("verify_result", md,
          Column("id", Integer, primary_key=True),
          Column("run_id", Integer, ForeignKey("verify_run.id"), nullable=False, index=True),
          Column("implementation_id", Integer, ForeignKey("implementation.id"), nullable=False, index=True),
          Column("params", Text, nullable=False),
          Column("value_mode", String(32), nullable=False),
          Column("seed", Integer, nullable=False),
          Column("source", String(16), nullable=False),
          Column("passed", Boolean, nullable=False),
          Column("stats", Text, nullable=False),
          Column("failure", Text, nullable=False),
          Column("repro", Text, nullable=False),
          Column("elapsed_s", Float, nullable=False),
          created())
    Table("calibration", md,
          Column("id", Integer, primary_key=True),
          Column("environment_id", Integer, ForeignKey("environment.id"), nullable=False, index=True),
          Column("measure", String(64), nullable=False),
          Column("value", Float, nullable=False),
          Column("unit", String(32), nullable=False),
          Column("samples", Text, nullable=True),
          Column("method", Text, nullable=False),
          Column("git_commit", String(64), nullable=False),
          created())
    Table("bench_result", md,
          Column("id", Integer, primary_key=True),
          Column("environment_id", Integer, ForeignKey("environment.id"), nullable=False, index=True),
          Column("implementation_id", Integer, ForeignKey("implementation.id"), nullable=False, index=True),
          Column("shape_label", String(255), nullable=False),
          Column("params", Text, nullable=False),
          Column("config", Text, nullable=False),
          Column("method", String(32), nullable=False),
          Column("median_us", Float, nullable=False),
          *(Column(n, Float, nullable=True) for n in ("q1_us", "q3_us")),
          Column("n", Integer, nullable=False),
          Column("rel_stderr", Float, nullable=True),
          Column("samples", Text, nullable=True),
          *(Column(n, Float, nullable=True) for n in ("flops", "bytes", "gbps", "tflops", "fraction_of_ceiling",
                                                       "sm_clock_mhz")),
          Column("git_commit", String(64), nullable=False),
          Column("run_tag", String(64), nullable=False),
          Column("extra", Text, nullable=True),
          created(),
          UniqueConstraint("environment_id", "implementation_id", "params", "config", "git_commit", "run_tag",
                           name="uq_bench_result"))
    Table("tune_trial", md,
          Column("id", Integer, primary_key=True),
          Column("environment_id", Integer, ForeignKey("environment.id"), nullable=False, index=True),
          Column("implementation_id", Integer, ForeignKey("implementation.id"), nullable=False, index=True),
          Column("shape_key", Text, nullable=False),
          Column("config", Text, nullable=False),
          Column("status", String(32), nullable=False),
          Column("reason", Text, nullable=False),
          Column("median_us", Float, nullable=True),
          Column("samples", Text, nullable=True),
          Column("git_commit", String(64), nullable=False),
          created(),
          UniqueConstraint("environment_id", "implementation_id", "shape_key", "config", name="uq_tune_trial"))
    Table("tune_choice", md,
          Column("id", Integer, primary_key=True),
          Column("environment_id", Integer, ForeignKey("environment.id"), nullable=False),
          Column("op_id", Integer, ForeignKey("op.id"), nullable=False),
          Column("implementation_id", Integer, ForeignKey("implementation.id"), nullable=True),
          Column("shape_key", Text, nullable=False),
          Column("config", Text, nullable=False),
          Column("median_us", Float, nullable=True),
          Column("git_commit", String(64), nullable=False),
          created(),
          Index("ix_tune_choice_key", "environment_id", "op_id", "shape_key"))
    return md


def _v1(conn: Connection) -> None:
    _v1_metadata().create_all(conn)


def op_add_column(conn: Connection, table: str, column: Column) -> None:
    """ALTER TABLE ... ADD COLUMN for a migration (a new column needs a server default or nullable)."""
    ddl = CreateColumn(column).compile(dialect=conn.dialect)
    conn.execute(text(f"ALTER TABLE {table} ADD COLUMN {ddl}"))


def _v2(conn: Connection) -> None:
    op_add_column(conn, "verify_result", Column("layout", String(16), nullable=False, server_default="contiguous"))


def _v3(conn: Connection) -> None:
    op_add_column(conn, "verify_run", Column("host", String(255), nullable=False, server_default=""))
    op_add_column(conn, "verify_run", Column("pid", Integer, nullable=True))


def _v4(conn: Connection) -> None:
    op_add_column(conn, "verify_run", Column("heartbeat", DateTime, nullable=True))


MIGRATIONS: list[Migration] = [
    Migration(1, "initial schema: environment, op, implementation, verify, calibration, bench, tune", _v1),
    Migration(2, "verify_result.layout: the input layout an example ran with", _v2),
    Migration(3, "verify_run.host, verify_run.pid: the process, so a killed run can be marked abandoned", _v3),
    Migration(4, "verify_run.heartbeat: last sign of life, so a killed run of another host is marked abandoned", _v4),
]


def latest_version(migrations: list[Migration] | None = None) -> int:
    return max(m.version for m in (migrations or MIGRATIONS))


def _version_table() -> Table:
    return Table(VERSION_TABLE, MetaData(),
                 Column("version", Integer, primary_key=True),
                 Column("description", Text, nullable=False),
                 Column("applied", DateTime, nullable=False))


def current_version(conn: Connection) -> int | None:
    """The database's schema version: None for an empty database (no tables at all)."""
    names = set(inspect(conn).get_table_names())
    if VERSION_TABLE not in names:
        if names:
            raise NotAKernelbenchDatabase(
                f"the database has tables ({', '.join(sorted(names)[:6])}) but no {VERSION_TABLE} table: it was not "
                f"made by kernelbench; point --db / KERNELBENCH_DB at another file")
        return None
    row = conn.execute(text(f"SELECT MAX(version) FROM {VERSION_TABLE}")).scalar()
    return int(row) if row is not None else 0


def upgrade(conn: Connection, migrations: list[Migration] | None = None) -> list[int]:
    """Apply the migrations the database lacks, in order, inside the caller's transaction. Returns the
    versions applied. A database newer than the code raises SchemaTooNew."""
    migrations = sorted(migrations or MIGRATIONS, key=lambda m: m.version)
    versions = [m.version for m in migrations]
    if versions != list(range(1, len(versions) + 1)):
        raise RuntimeError(f"migration versions must be 1..N without gaps, got {versions}")
    have = current_version(conn)
    if have is None:
        _version_table().create(conn)
        have = 0
    head = versions[-1]
    if have > head:
        raise SchemaTooNew(f"the database is at schema version {have}, newer than this kernelbench "
                           f"(knows up to {head}); upgrade kernelbench or use another database")
    applied = []
    vt = _version_table()
    for m in migrations:
        if m.version <= have:
            continue
        m.apply(conn)
        conn.execute(vt.insert().values(version=m.version, description=m.description, applied=utcnow()))
        applied.append(m.version)
    return applied
