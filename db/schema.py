"""The results database: one SQLAlchemy 2.x ORM model per table (import as kernelbench.db.schema).

Every result is keyed data (STYLE.md item 9): which environment (GPU, driver, versions), which op
and implementation (with a hash of its source), which parameters and config, which git commit.
JSON columns hold canonical JSON text (sorted keys, no spaces, see `canonical_json`), so that two
equal dicts are equal strings and a JSON column can sit in a unique key.

Tables (names are fixed; add columns through a migration in db/migrations.py):
    environment     a machine + software stack, unique by `fingerprint` (kernelbench.harness.fingerprint)
    op              an op of docs/OPS.md, unique by name
    implementation  (op, name, source_hash): a changed kernel source is a new row
    verify_run      one `kernelbench verify` invocation
    verify_result   one verified example (params, value mode) with per-output error statistics
    calibration     a measured ceiling of an environment (copy_gbps, bf16_tflops, ...)
    bench_result    one timed (implementation, params, config) with raw samples
    tune_trial      one config tried by the tuner, valid or not (unique, so a tune resumes)
    tune_choice     the config the tuner chose for (environment, op, shape key)

Times are naive UTC datetimes (`utcnow()`).
"""
from __future__ import annotations

import datetime as _dt
import json
from typing import Optional

from sqlalchemy import (BigInteger, Boolean, DateTime, Float, ForeignKey, Index, Integer, String, Text, UniqueConstraint)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship
from sqlalchemy.types import TypeDecorator

from kernelbench.db.values import canonical_json, utcnow



class CanonicalJSON(TypeDecorator):
    """A JSON value stored as canonical text (usable in unique constraints on any backend)."""
    impl = Text
    cache_ok = True

    def process_bind_param(self, value, dialect):
        return None if value is None else canonical_json(value)

    def process_result_value(self, value, dialect):
        return None if value is None else json.loads(value)


class Base(DeclarativeBase):
    pass


class Environment(Base):
    """A machine and its software stack. `fingerprint` hashes every field below except `git_commit`
    (results carry their own commit), so one calibration serves every commit on that machine.
    CPU-only machines have gpu_name "cpu" and zero/empty GPU fields."""
    __tablename__ = "environment"
    id: Mapped[int] = mapped_column(primary_key=True)
    fingerprint: Mapped[str] = mapped_column(String(64), unique=True)
    device_type: Mapped[str] = mapped_column(String(16))          # "cuda" or "cpu"
    gpu_name: Mapped[str] = mapped_column(String(128))
    compute_capability: Mapped[str] = mapped_column(String(16))   # "9.0", "12.0", "" on CPU
    sm_count: Mapped[int] = mapped_column(Integer, default=0)
    l2_bytes: Mapped[int] = mapped_column(BigInteger, default=0)
    memory_bytes: Mapped[int] = mapped_column(BigInteger, default=0)
    driver: Mapped[str] = mapped_column(String(64), default="")
    cuda: Mapped[str] = mapped_column(String(32), default="")
    torch: Mapped[str] = mapped_column(String(64), default="")
    triton: Mapped[str] = mapped_column(String(64), default="")
    python: Mapped[str] = mapped_column(String(32), default="")
    hostname: Mapped[str] = mapped_column(String(255), default="")
    cpu: Mapped[str] = mapped_column(String(255), default="")
    git_commit: Mapped[str] = mapped_column(String(64), default="")  # the project's commit when first seen
    extra: Mapped[Optional[dict]] = mapped_column(CanonicalJSON, nullable=True)
    created: Mapped[_dt.datetime] = mapped_column(DateTime, default=utcnow)


class Op(Base):
    __tablename__ = "op"
    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(128), unique=True)
    family: Mapped[str] = mapped_column(String(64), default="")


class Implementation(Base):
    """An implementation of an op as it was: a changed source is a new row (new source_hash)."""
    __tablename__ = "implementation"
    __table_args__ = (UniqueConstraint("op_id", "name", "source_hash", name="uq_implementation"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    op_id: Mapped[int] = mapped_column(ForeignKey("op.id"))
    name: Mapped[str] = mapped_column(String(128))
    source_hash: Mapped[str] = mapped_column(String(64))
    backend: Mapped[str] = mapped_column(String(32), default="")
    source: Mapped[str] = mapped_column(String(255), default="")   # module it came from
    created: Mapped[_dt.datetime] = mapped_column(DateTime, default=utcnow)
    op: Mapped[Op] = relationship()


class VerifyRun(Base):
    """One `kernelbench verify` invocation. status: running, passed, failed, not run, error, interrupted,
    abandoned (its process is gone without finishing: killed; set when the database is next opened).
    host and pid identify the process (host: hostname and PID namespace, where the pid means something);
    heartbeat is its last sign of life, renewed while it runs (db/store.py: HEARTBEAT_S, STALE_AFTER_S)."""
    __tablename__ = "verify_run"
    id: Mapped[int] = mapped_column(primary_key=True)
    environment_id: Mapped[int] = mapped_column(ForeignKey("environment.id"))
    started: Mapped[_dt.datetime] = mapped_column(DateTime, default=utcnow)
    finished: Mapped[Optional[_dt.datetime]] = mapped_column(DateTime, nullable=True)
    profile: Mapped[str] = mapped_column(String(32), default="")      # hypothesis profile: explore / ci
    device: Mapped[str] = mapped_column(String(16), default="")       # cuda / cpu
    shape_set: Mapped[str] = mapped_column(String(64), default="")
    command: Mapped[str] = mapped_column(Text, default="")
    status: Mapped[str] = mapped_column(String(16), default="running")
    git_commit: Mapped[str] = mapped_column(String(64), default="")
    n_results: Mapped[int] = mapped_column(Integer, default=0)
    n_failed: Mapped[int] = mapped_column(Integer, default=0)
    host: Mapped[str] = mapped_column(String(255), default="", server_default="")
    pid: Mapped[Optional[int]] = mapped_column(Integer, nullable=True)
    heartbeat: Mapped[Optional[_dt.datetime]] = mapped_column(DateTime, nullable=True)
    environment: Mapped[Environment] = relationship()


class VerifyResult(Base):
    """One verified example. `stats` maps each output name to its error statistics
    (max_abs, max_rel, rel_fro, cosine, mismatches, numel, nan_mismatch, first_bad, passed) plus
    the checks that are not per-output under the key "checks" (written, inputs_unmodified,
    deterministic). `source`: "case" (a real shape of the shape set), "hypothesis" or "replay";
    `layout`: "contiguous" (as the op spec made the inputs) or "strided" (padded views)."""
    __tablename__ = "verify_result"
    id: Mapped[int] = mapped_column(primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("verify_run.id"), index=True)
    implementation_id: Mapped[int] = mapped_column(ForeignKey("implementation.id"), index=True)
    params: Mapped[dict] = mapped_column(CanonicalJSON)
    value_mode: Mapped[str] = mapped_column(String(32))
    seed: Mapped[int] = mapped_column(Integer, default=0)
    source: Mapped[str] = mapped_column(String(16), default="hypothesis")
    layout: Mapped[str] = mapped_column(String(16), default="contiguous", server_default="contiguous")  # v2
    passed: Mapped[bool] = mapped_column(Boolean)
    stats: Mapped[dict] = mapped_column(CanonicalJSON)
    failure: Mapped[str] = mapped_column(Text, default="")
    repro: Mapped[str] = mapped_column(Text, default="")
    elapsed_s: Mapped[float] = mapped_column(Float, default=0.0)
    created: Mapped[_dt.datetime] = mapped_column(DateTime, default=utcnow)
    run: Mapped[VerifyRun] = relationship()
    implementation: Mapped[Implementation] = relationship()


class Calibration(Base):
    """A measured ceiling. measure: copy_gbps, bf16_tflops, fp8_tflops, l2_gbps, ...; unit: GB/s,
    TFLOP/s; samples: the raw measurements; method: how it was measured (free text)."""
    __tablename__ = "calibration"
    id: Mapped[int] = mapped_column(primary_key=True)
    environment_id: Mapped[int] = mapped_column(ForeignKey("environment.id"), index=True)
    measure: Mapped[str] = mapped_column(String(64))
    value: Mapped[float] = mapped_column(Float)
    unit: Mapped[str] = mapped_column(String(32))
    samples: Mapped[Optional[list]] = mapped_column(CanonicalJSON, nullable=True)
    method: Mapped[str] = mapped_column(Text, default="")
    git_commit: Mapped[str] = mapped_column(String(64), default="")
    created: Mapped[_dt.datetime] = mapped_column(DateTime, default=utcnow)
    environment: Mapped[Environment] = relationship()


class BenchResult(Base):
    """One timed (implementation, params, config). Unique over environment, implementation, params,
    config, git commit and run tag: re-timing the same thing at the same commit needs a new
    `run_tag` (or updates the row). Times in microseconds; samples are the raw per-rep times."""
    __tablename__ = "bench_result"
    __table_args__ = (UniqueConstraint("environment_id", "implementation_id", "params", "config", "git_commit",
                                       "run_tag", name="uq_bench_result"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    environment_id: Mapped[int] = mapped_column(ForeignKey("environment.id"), index=True)
    implementation_id: Mapped[int] = mapped_column(ForeignKey("implementation.id"), index=True)
    shape_label: Mapped[str] = mapped_column(String(255), default="")
    params: Mapped[dict] = mapped_column(CanonicalJSON)
    config: Mapped[dict] = mapped_column(CanonicalJSON)          # {} when the default config ran
    method: Mapped[str] = mapped_column(String(32), default="")  # "graph", "events", ...
    median_us: Mapped[float] = mapped_column(Float)
    q1_us: Mapped[Optional[float]] = mapped_column(Float, nullable=True)
    q3_us: Mapped[Optional[float]] = mapped_column(Float, nullable=True)
    n: Mapped[int] = mapped_column(Integer, default=0)
    rel_stderr: Mapped[Optional[float]] = mapped_column(Float, nullable=True)
    samples: Mapped[Optional[list]] = mapped_column(CanonicalJSON, nullable=True)
    flops: Mapped[Optional[float]] = mapped_column(Float, nullable=True)
    bytes: Mapped[Optional[float]] = mapped_column(Float, nullable=True)
    gbps: Mapped[Optional[float]] = mapped_column(Float, nullable=True)
    tflops: Mapped[Optional[float]] = mapped_column(Float, nullable=True)
    fraction_of_ceiling: Mapped[Optional[float]] = mapped_column(Float, nullable=True)
    sm_clock_mhz: Mapped[Optional[float]] = mapped_column(Float, nullable=True)
    git_commit: Mapped[str] = mapped_column(String(64), default="")
    run_tag: Mapped[str] = mapped_column(String(64), default="")
    extra: Mapped[Optional[dict]] = mapped_column(CanonicalJSON, nullable=True)
    created: Mapped[_dt.datetime] = mapped_column(DateTime, default=utcnow)
    environment: Mapped[Environment] = relationship()
    implementation: Mapped[Implementation] = relationship()


TUNE_STATUSES = ("ok", "invalid_compile", "invalid_smem", "invalid_spill", "invalid_verify", "crash", "timeout")


class TuneTrial(Base):
    """One config tried for one shape key. Unique over (environment, implementation, shape key,
    config): a tune that was interrupted finds its finished trials and skips them. status is one of
    TUNE_STATUSES; reason says why an invalid config is invalid; median_us is None unless ok."""
    __tablename__ = "tune_trial"
    __table_args__ = (UniqueConstraint("environment_id", "implementation_id", "shape_key", "config",
                                       name="uq_tune_trial"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    environment_id: Mapped[int] = mapped_column(ForeignKey("environment.id"), index=True)
    implementation_id: Mapped[int] = mapped_column(ForeignKey("implementation.id"), index=True)
    shape_key: Mapped[dict] = mapped_column(CanonicalJSON)
    config: Mapped[dict] = mapped_column(CanonicalJSON)
    status: Mapped[str] = mapped_column(String(32))
    reason: Mapped[str] = mapped_column(Text, default="")
    median_us: Mapped[Optional[float]] = mapped_column(Float, nullable=True)
    samples: Mapped[Optional[list]] = mapped_column(CanonicalJSON, nullable=True)
    git_commit: Mapped[str] = mapped_column(String(64), default="")
    created: Mapped[_dt.datetime] = mapped_column(DateTime, default=utcnow)
    environment: Mapped[Environment] = relationship()
    implementation: Mapped[Implementation] = relationship()


class TuneChoice(Base):
    """The config chosen for (environment, op, shape key). A re-tune adds a row; the newest wins."""
    __tablename__ = "tune_choice"
    __table_args__ = (Index("ix_tune_choice_key", "environment_id", "op_id", "shape_key"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    environment_id: Mapped[int] = mapped_column(ForeignKey("environment.id"))
    op_id: Mapped[int] = mapped_column(ForeignKey("op.id"))
    implementation_id: Mapped[Optional[int]] = mapped_column(ForeignKey("implementation.id"), nullable=True)
    shape_key: Mapped[dict] = mapped_column(CanonicalJSON)
    config: Mapped[dict] = mapped_column(CanonicalJSON)
    median_us: Mapped[Optional[float]] = mapped_column(Float, nullable=True)
    git_commit: Mapped[str] = mapped_column(String(64), default="")
    created: Mapped[_dt.datetime] = mapped_column(DateTime, default=utcnow)
    environment: Mapped[Environment] = relationship()
    op: Mapped[Op] = relationship()


TABLES = ("environment", "op", "implementation", "verify_run", "verify_result", "calibration", "bench_result",
          "tune_trial", "tune_choice")
