"""The results database: migrations, schema drift, clear errors, unique keys, concurrent writers.
Every test taking `url` runs on both backends: a SQLite file and a fresh database on a live
PostgreSQL server (tests/_postgres.py)."""
from __future__ import annotations

import multiprocessing as mp
import sqlite3

import pytest
from sqlalchemy import Column, Integer, inspect, select
from sqlalchemy.exc import IntegrityError

from kernelbench.db import migrations, schema
from kernelbench.db.store import (CorruptDatabase, NotAKernelbenchDatabase, SchemaTooNew, Store, StoreError,
                                  default_url, raw_execute)
from kernelbench.harness.fingerprint import fingerprint, fingerprint_hash


@pytest.fixture(params=["sqlite", "postgresql"])
def url(request, tmp_path):
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'kb.sqlite'}"
    return request.getfixturevalue("postgres_server").create_database()


def _fp(**over):
    fp = fingerprint("cpu")
    fp.update(over)
    fp.pop("fingerprint")
    return fp


def test_empty_database_migrates_to_latest_version(url):
    store = Store(url)
    assert store.version() == migrations.latest_version()
    rows = raw_execute(store, "SELECT version FROM schema_version ORDER BY version")
    assert [r[0] for r in rows] == list(range(1, migrations.latest_version() + 1))
    # reopening applies nothing
    assert Store(url).migrate() == []


def test_migrated_schema_matches_the_orm(url):
    """A schema.py change without its migration fails here."""
    store = Store(url)
    insp = inspect(store.engine)
    assert set(insp.get_table_names()) == set(schema.TABLES) | {migrations.VERSION_TABLE}
    for table in schema.Base.metadata.sorted_tables:
        got = {c["name"]: c for c in insp.get_columns(table.name)}
        assert set(got) == {c.name for c in table.columns}, table.name
        for c in table.columns:
            assert got[c.name]["nullable"] == c.nullable or c.primary_key, f"{table.name}.{c.name} nullability"
        want_unique = {tuple(sorted(col.name for col in u.columns)) for u in table.constraints
                       if type(u).__name__ == "UniqueConstraint"}
        want_unique |= {(c.name,) for c in table.columns if c.unique}
        have_unique = {tuple(sorted(u["column_names"])) for u in insp.get_unique_constraints(table.name)}
        have_unique |= {tuple(sorted(i["column_names"])) for i in insp.get_indexes(table.name) if i["unique"]}
        assert want_unique <= have_unique, table.name


def test_newer_schema_is_a_clear_error(url):
    store = Store(url)
    raw_execute(store, "INSERT INTO schema_version (version, description, applied) VALUES (999, 'future', '2030-01-01')")
    store.dispose()
    with pytest.raises(SchemaTooNew, match="version 999"):
        Store(url)


def test_corrupt_file_is_a_clear_error(tmp_path):
    bad = tmp_path / "bad.sqlite"
    bad.write_bytes(b"this is not sqlite " * 300)
    with pytest.raises(CorruptDatabase, match="corrupt"):
        Store(f"sqlite:///{bad}")
    # a real database whose pages were overwritten
    good = tmp_path / "good.sqlite"
    store = Store(f"sqlite:///{good}")
    env = store.environment_id(_fp())
    impl = store.op_impl_id("op_a", "triton", "h1")
    run = store.start_verify_run(env, device="cpu")
    for i in range(200):
        store.add_verify_result(run, impl, params={"T": i}, value_mode="normal", passed=True, stats={"x": i})
    store.dispose()  # the last connection to close checkpoints the WAL into the file
    assert not (tmp_path / "good.sqlite-wal").exists()
    data = bytearray(good.read_bytes())
    assert len(data) > 4 * 4096
    data[2 * 4096: 4 * 4096] = b"\xde\xad\xbe\xef" * 2048
    good.write_bytes(bytes(data))
    with pytest.raises(CorruptDatabase):
        Store(f"sqlite:///{good}")


def test_foreign_database_is_refused(tmp_path):
    path = tmp_path / "other.sqlite"
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT)")
    con.commit()
    con.close()
    with pytest.raises(NotAKernelbenchDatabase, match="customers"):
        Store(f"sqlite:///{path}")


def test_bad_url_and_directory_are_clear_errors(tmp_path):
    with pytest.raises(StoreError, match="not a database URL"):
        Store("definitely not a url")
    with pytest.raises(StoreError, match="directory"):
        Store(f"sqlite:///{tmp_path}")


def test_default_url_follows_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("KERNELBENCH_DB", "sqlite:///x.sqlite")
    assert default_url() == "sqlite:///x.sqlite"
    monkeypatch.delenv("KERNELBENCH_DB")
    monkeypatch.setenv("KERNELBENCH_HOME", str(tmp_path / "home"))
    assert default_url() == f"sqlite:///{tmp_path / 'home' / 'kernelbench.sqlite'}"
    Store()  # creates the directory and the file
    assert (tmp_path / "home" / "kernelbench.sqlite").exists()


def test_a_new_migration_upgrades_an_old_database_once(url):
    store = Store(url)
    env = store.environment_id(_fp())
    v = migrations.latest_version()
    extra = migrations.MIGRATIONS + [migrations.Migration(
        v + 1, "test: add a column", lambda conn: migrations.op_add_column(conn, "op", Column("extra_col", Integer)))]
    assert store.migrate(extra) == [v + 1]
    assert store.migrate(extra) == []
    cols = {c["name"] for c in inspect(store.engine).get_columns("op")}
    assert "extra_col" in cols
    assert store.environment_id(_fp()) == env  # data kept
    # the code without that migration now sees a newer database
    with pytest.raises(SchemaTooNew):
        store.migrate()


def test_keys_are_get_or_create_and_distinct(url):
    store = Store(url)
    a = store.environment_id(_fp())
    assert store.environment_id(_fp()) == a
    assert store.environment_id(_fp(gpu_name="NVIDIA H200", device_type="cuda")) != a
    # the commit is not part of the environment's identity
    assert store.environment_id(_fp(git_commit="deadbeef")) == a
    assert fingerprint_hash(_fp()) != fingerprint_hash(_fp(driver="999.1"))
    i1 = store.op_impl_id("fp8_linear", "triton", "aaaa", family="linear")
    assert store.op_impl_id("fp8_linear", "triton", "aaaa") == i1
    i2 = store.op_impl_id("fp8_linear", "triton", "bbbb")
    assert i2 != i1
    with store.session() as s:
        impls = s.scalars(select(schema.Implementation)).all()
        assert {(i.op.name, i.source_hash) for i in impls} == {("fp8_linear", "aaaa"), ("fp8_linear", "bbbb")}
        assert impls[0].op.family == "linear"


def test_store_named_methods_are_the_one_door(url):
    """Every record kind outside db/ is written and read through a named Store method (issue 14)."""
    from kernelbench.db.errors import DuplicateResult
    store = Store(url)
    env_a = store.environment_id(_fp(gpu_name="GPU A"))
    env_b = store.environment_id(_fp(gpu_name="GPU B", hostname="other"))
    norm = store.op_impl_id("rms_norm", "triton", "h1", family="norm")
    lin = store.op_impl_id("fp8_linear", "triton", "h2", family="linear")
    row = dict(environment_id=env_a, implementation_id=norm, shape_label="M=16", params={"M": 16}, config={},
               method="graph", median_us=5.0, git_commit="abc123", run_tag="r1")
    assert store.add_bench_results([row, {**row, "implementation_id": lin, "median_us": 9.0},
                                    {**row, "environment_id": env_b, "median_us": 7.0, "run_tag": "r2",
                                     "git_commit": "def456"}]) == 3
    with pytest.raises(DuplicateResult):
        store.add_bench_results([{**row, "median_us": 6.0}])
    assert store.newest_bench_run_tag() == "r2"
    got = store.bench_results()
    assert [(b["op"], b["impl"], b["device"], b["median_us"]) for b in got] == \
        [("rms_norm", "triton", "GPU A", 5.0), ("fp8_linear", "triton", "GPU A", 9.0), ("rms_norm", "triton", "GPU B", 7.0)]
    assert [b["median_us"] for b in store.bench_results(ops=["rms_norm"])] == [5.0, 7.0]
    assert [b["median_us"] for b in store.bench_results(device="GPU B")] == [7.0]
    assert [b["median_us"] for b in store.bench_results(commit="abc")] == [5.0, 9.0]
    assert [b["median_us"] for b in store.bench_results(run_tag="r2", ops=["fp8_linear"])] == []
    assert got[0]["label"] == "M=16" and got[0]["extra"] == {} and got[0]["source_hash"] == "h1"

    store.add_tune_trial(environment_id=env_a, implementation_id=norm, shape_key={"M": 16}, config={"B": 1},
                         status="ok", median_us=1.5, samples=[1.5])
    store.add_tune_choice(environment_id=env_a, op_id=store.op_id("rms_norm"), implementation_id=norm,
                          shape_key={"M": 16}, config={"B": 1}, median_us=1.5)
    assert [(t["config"], t["status"]) for t in store.tune_trials(env_a, norm, {"M": 16})] == [({"B": 1}, "ok")]
    assert store.tune_trials(env_b, norm, {"M": 16}) == []

    store.add_calibrations([dict(environment_id=env_a, measure="copy_gbps", value=1.0, unit="GB/s"),
                            dict(environment_id=env_a, measure="copy_gbps", value=2.0, unit="GB/s")])
    assert store.newest_calibrations(env_a) == {"copy_gbps": 2.0}
    assert store.newest_calibrations(gpu_name="GPU B") == {}
    assert store.environment(env_b)["gpu_name"] == "GPU B" and store.environment(10_000) == {}

    run = store.start_verify_run(env_a, device="cpu", profile="ci")
    store.add_verify_result(run, norm, params={"M": 1}, value_mode="normal", seed=0, passed=True, stats={})
    store.add_verify_result(run, norm, params={"M": 2}, value_mode="normal", seed=1, passed=False, stats={})
    out = store.verify_outcomes(op="rms_norm", source_hash="h1", device="cpu")
    assert sorted(o["passed"] for o in out) == [False, True] and {o["gpu_name"] for o in out} == {"GPU A"}
    assert store.verify_outcomes(device="cuda") == []


def test_bench_and_tune_unique_keys_use_canonical_json(url):
    store = Store(url)
    env = store.environment_id(_fp())
    impl = store.op_impl_id("rms_norm", "triton", "h")
    with store.session() as s:
        s.add(schema.BenchResult(environment_id=env, implementation_id=impl, params={"M": 16, "N": 4096},
                                 config={"BLOCK": 128, "num_warps": 4}, median_us=5.5, samples=[5.4, 5.5, 5.7]))
    with pytest.raises(IntegrityError):
        with store.session() as s:  # same dicts, other key order
            s.add(schema.BenchResult(environment_id=env, implementation_id=impl, params={"N": 4096, "M": 16},
                                     config={"num_warps": 4, "BLOCK": 128}, median_us=6.0))
    with store.session() as s:  # another run tag is a new row
        s.add(schema.BenchResult(environment_id=env, implementation_id=impl, params={"N": 4096, "M": 16},
                                 config={"num_warps": 4, "BLOCK": 128}, median_us=6.0, run_tag="rerun"))
        s.add(schema.TuneTrial(environment_id=env, implementation_id=impl, shape_key={"M": 16}, config={"B": 1},
                               status="invalid_smem", reason="needs 120 KB"))
    with pytest.raises(IntegrityError):
        with store.session() as s:
            s.add(schema.TuneTrial(environment_id=env, implementation_id=impl, shape_key={"M": 16}, config={"B": 1},
                                   status="ok", median_us=1.0))
    with store.session() as s:
        rows = s.scalars(select(schema.BenchResult).order_by(schema.BenchResult.id)).all()
        assert [r.median_us for r in rows] == [5.5, 6.0]
        assert rows[0].samples == [5.4, 5.5, 5.7] and rows[0].params == {"M": 16, "N": 4096}
        trial = s.scalars(select(schema.TuneTrial)).one()
        assert (trial.status, trial.reason) == ("invalid_smem", "needs 120 KB")


def _writer(url: str, tag: int, n: int, q) -> None:
    try:
        store = Store(url)
        env = store.environment_id(_fp())
        impl = store.op_impl_id("sparse_attention", "triton", "h")
        run = store.start_verify_run(env, device="cpu", command=f"writer {tag}")
        for i in range(n):
            store.add_verify_result(run, impl, params={"writer": tag, "i": i}, value_mode="normal",
                                    passed=bool(i % 2), stats={"o": {"max_abs": i * 1e-3}})
        store.finish_verify_run(run, "passed")
        q.put(("ok", run))
    except Exception as e:  # pragma: no cover - reported to the parent
        q.put(("error", repr(e)))


WRITERS = 2     # processes: each spawned child imports torch (4.7 s of CPU apiece on the shared 2-core dev machine)


def test_concurrent_writers_lose_nothing(url):
    """Two processes open a fresh file at once (both migrate) and interleave their writes."""
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    n = 60
    procs = [ctx.Process(target=_writer, args=(url, tag, n, q)) for tag in range(WRITERS)]
    for p in procs:
        p.start()
    outcomes = [q.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(timeout=60)
    assert all(kind == "ok" for kind, _ in outcomes), outcomes
    store = Store(url)
    with store.session() as s:
        results = s.scalars(select(schema.VerifyResult)).all()
        runs = s.scalars(select(schema.VerifyRun)).all()
        assert len(results) == WRITERS * n
        assert {(r.params["writer"], r.params["i"]) for r in results} == {(t, i) for t in range(WRITERS) for i in range(n)}
        assert sorted((r.n_results, r.n_failed, r.status) for r in runs) == [(n, n // 2, "passed")] * WRITERS
        assert len(s.scalars(select(schema.Environment)).all()) == 1
        assert len(s.scalars(select(schema.Implementation)).all()) == 1
    assert store.version() == migrations.latest_version()


def test_fingerprint_describes_a_gpu(monkeypatch):
    """The CUDA branch, with the device properties faked (no GPU here)."""
    import types

    import torch

    import kernelbench.harness.fingerprint as F
    props = types.SimpleNamespace(name="NVIDIA H200", major=9, minor=0, multi_processor_count=132,
                                  L2_cache_size=60 * 2 ** 20, total_memory=143_771_156_480)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda i: props)
    monkeypatch.setattr(F, "_driver", lambda: "570.86")
    fp = F.fingerprint("cuda")
    assert (fp["gpu_name"], fp["compute_capability"], fp["sm_count"], fp["l2_bytes"], fp["driver"]) == \
        ("NVIDIA H200", "9.0", 132, 60 * 2 ** 20, "570.86")
    assert fp["fingerprint"] == fingerprint_hash(fp) != fingerprint("cpu")["fingerprint"]
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(RuntimeError, match="no CUDA device"):
        F.fingerprint("cuda")


def test_a_version_1_database_upgrades_with_its_data(url):
    store = Store(url, migrate=False)
    assert store.migrate(migrations.MIGRATIONS[:1]) == [1]
    env = store.environment_id(_fp())
    impl = store.op_impl_id("rms_norm", "triton", "h")
    raw_execute(store, "INSERT INTO verify_run (environment_id, started, profile, device, shape_set, command, status, "
                       f"git_commit, n_results, n_failed) VALUES ({env}, '2026-11-29', 'ci', 'cpu', '', '', 'passed', "
                       "'', 1, 0)")
    raw_execute(store, "INSERT INTO verify_result (run_id, implementation_id, params, value_mode, seed, source, passed, "
                       f"stats, failure, repro, elapsed_s, created) VALUES (1, {impl}, '{{\"M\":1}}', 'normal', 7, "
                       "'hypothesis', TRUE, '{}', '', '', 0.5, '2026-11-29')")
    store.dispose()
    store = Store(url)   # opening migrates
    assert store.version() == migrations.latest_version()
    (row,) = store.verify_results(1)
    assert (row["params"], row["seed"], row["layout"], row["passed"]) == ({"M": 1}, 7, "contiguous", True)


# ---- PostgreSQL specifics ------------------------------------------------------------------------
def test_postgresql_url_picks_an_installed_driver_or_says_which_to_install(monkeypatch):
    from kernelbench.db import store as store_mod
    installed = {"pg8000"}
    monkeypatch.setattr("importlib.util.find_spec", lambda name: object() if name in installed else None)
    assert store_mod.resolve_url("postgresql://u@h/db").drivername == "postgresql+pg8000"
    installed.add("psycopg")    # psycopg 3 is preferred
    assert store_mod.resolve_url("postgres://u@h/db").drivername == "postgresql+psycopg"
    assert store_mod.resolve_url("postgresql+psycopg2://u@h/db").drivername == "postgresql+psycopg2"
    assert store_mod.resolve_url("sqlite:///x.sqlite").drivername == "sqlite"
    installed.clear()
    with pytest.raises(StoreError, match=r"needs a driver .*pip install 'kernelbench\[postgres\]'"):
        Store("postgresql://u:secret@h/db")


def test_unreachable_postgresql_is_a_clear_error(postgres_server):
    bad = postgres_server.url("no_such_database")
    with pytest.raises(StoreError, match="cannot connect to .*no_such_database.*does not exist"):
        Store(bad)


def test_every_command_takes_a_postgresql_url(postgres_server):
    """The CLI opens --db through Store: verify writes there, and a second command reads it back."""
    from click.testing import CliRunner

    from kernelbench.commands.verify import command as verify
    url = postgres_server.create_database()
    res = CliRunner().invoke(verify, ["rms_norm", "--impl", "reference", "--device", "cpu", "--examples", "2",
                                      "--profile", "ci", "--db", url])
    assert res.exit_code == 0, res.output
    store = Store(url)
    with store.session() as s:
        run = s.scalars(select(schema.VerifyRun)).one()
        assert (run.status, run.n_results, run.n_failed) == ("passed", 2, 0)
