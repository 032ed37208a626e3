"""The store's pending queue: keyed by sink, written with its result, and a catalog of the
earlier layout (a ``mlflow_synced`` column per result table) migrated without losing an item."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import duckdb
import polars as pl
import pytest

from proxydiag.errors import StoreError
from proxydiag.store import RunStore, comparison_key
from proxydiag.store import _catalog as catalog
from proxydiag.store import _files as files
from tests.store.test_store import comparison, diagnosis, make_run

# the catalog as schemas 1 and 2 wrote it (schema 2 = schema 1 + the GROWN columns)
OLD_DDL = {
    1: (
        "CREATE TABLE meta (key VARCHAR PRIMARY KEY, value VARCHAR)",
        """CREATE TABLE runs (
            run VARCHAR PRIMARY KEY, name VARCHAR, role VARCHAR, "group" VARCHAR, seed BIGINT,
            experts_kept DOUBLE, cost_per_step DOUBLE, precision VARCHAR, format VARCHAR,
            source VARCHAR, n_points BIGINT, n_metrics INTEGER, first_step BIGINT,
            last_step BIGINT, ingested_at TIMESTAMP, content_hash VARCHAR,
            schema_version INTEGER, file VARCHAR, attrs VARCHAR, mapping VARCHAR,
            events VARCHAR)""",
        """CREATE TABLE diagnoses (
            run VARCHAR PRIMARY KEY, label VARCHAR, onset_step BIGINT, confidence DOUBLE,
            json VARCHAR, mlflow_synced BOOLEAN, created_at TIMESTAMP)""",
        """CREATE TABLE comparisons (
            key VARCHAR PRIMARY KEY, proxy_run VARCHAR, full_runs VARCHAR[], fidelity DOUBLE,
            verdict VARCHAR, json VARCHAR, mlflow_synced BOOLEAN, created_at TIMESTAMP)""",
    ),
}
OLD_DDL[2] = (
    *OLD_DDL[1],
    "ALTER TABLE runs ADD COLUMN experts_total DOUBLE",
    "ALTER TABLE runs ADD COLUMN source_key VARCHAR",
    "ALTER TABLE runs ADD COLUMN source_hash VARCHAR",
    "ALTER TABLE diagnoses ADD COLUMN input_hash VARCHAR",
    "ALTER TABLE comparisons ADD COLUMN input_hash VARCHAR",
)
AT = dt.datetime(2026, 11, 2, 9, 30)


def _old_store(path: Path, version: int) -> dict[str, Any]:
    """A store as the earlier code left it: four runs on disk and in the catalog, a diagnosis
    of each (two pending, one synced, one whose flag is NULL) and three comparisons (two
    pending). Returns what the store held, per table, and each result's flag."""
    (path / "runs").mkdir(parents=True)
    runs = [make_run(f"r{i}", f"/data/r{i}.csv", values=[float(i), float("nan")]) for i in range(4)]
    con = duckdb.connect(str(path / catalog.CATALOG_NAME))
    for statement in OLD_DDL[version]:
        con.execute(statement)
    con.execute("INSERT INTO meta VALUES ('schema_version', ?)", [str(version)])
    for run in runs:
        name = f"{run.id}.parquet"
        digest = files.content_hash(run)
        files.write(path / "runs" / name, run, digest=digest)
        row = catalog.run_row(run, file=name, digest=digest)
        row.pop("experts_total")
        cols = [*row, "ingested_at"]
        con.execute(
            f"INSERT INTO runs ({', '.join(repr(c).replace(chr(39), chr(34)) for c in cols)}) "
            f"VALUES ({', '.join('?' * len(cols))})",
            [*row.values(), AT],
        )
    extra = ", input_hash" if version == 2 else ""
    flags: dict[tuple[str, str], bool | None] = {}
    for run, synced in zip(runs, [False, True, None, False], strict=True):
        d = diagnosis(run.id, "healthy" if synced else "gradient_overflow")
        values = [run.id, d.label, d.onset_step, d.confidence, json.dumps(d.to_dict()), synced]
        con.execute(
            "INSERT INTO diagnoses (run, label, onset_step, confidence, json, mlflow_synced, "
            f"created_at{extra}) VALUES (?, ?, ?, ?, ?, ?, ?{', ?' if extra else ''})",
            [*values, AT, *(["in-" + run.id] if extra else [])],
        )
        flags["diagnosis", run.id] = synced
    for proxy, fulls, synced in [
        (runs[3].id, (runs[0].id, runs[1].id), False),
        (runs[2].id, (runs[0].id,), True),
        (runs[1].id, (runs[0].id,), False),
    ]:
        c = comparison(proxy, fulls)
        key = f"{proxy}<-{','.join(sorted(fulls))}"
        con.execute(
            "INSERT INTO comparisons (key, proxy_run, full_runs, fidelity, verdict, json, "
            "mlflow_synced, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            [key, proxy, list(fulls), c.fidelity, c.verdict, json.dumps(c.to_dict()), synced, AT],
        )
        flags["comparison", key] = synced
    held: dict[str, Any] = {
        table: con.execute(f"SELECT * EXCLUDE (mlflow_synced) FROM {table} ORDER BY 1").fetchall()
        for table in ("diagnoses", "comparisons")
    }
    held["runs"] = con.execute("SELECT run, content_hash, file FROM runs ORDER BY run").fetchall()
    held["flags"] = flags
    con.close()
    return held


def _pending(store: RunStore) -> list[tuple[str, str]]:
    return [(item["kind"], item["key"]) for item in store.outbox.pending()]


def _flags(store: RunStore) -> dict[tuple[str, str], bool | None]:
    diags, comps = store.diagnoses(), store.comparisons()
    pairs = zip(comps["proxy_run"], comps["full_runs"], strict=True)
    keys = [comparison_key(proxy, fulls) for proxy, fulls in pairs]
    return {
        **{("diagnosis", k): v for k, v in zip(diags["run"], diags["mlflow_synced"], strict=True)},
        **{("comparison", k): v for k, v in zip(keys, comps["mlflow_synced"], strict=True)},
    }


@pytest.mark.parametrize("version", [1, 2])
def test_an_old_layout_is_read_then_migrated_keeping_every_pending_item(
    tmp_path: Path, version: int
) -> None:
    path = tmp_path / "s"
    held = _old_store(path, version)
    store = RunStore(path)
    # read as it is (no writer has opened it yet): the flags are the old columns
    before_pending = _pending(store)
    before = (store.diagnoses(), store.comparisons())
    assert _flags(store) == held["flags"]
    waiting = [item for item, synced in held["flags"].items() if synced is False]
    assert before_pending == sorted(waiting, key=lambda item: (item[0] != "diagnosis", item[1]))
    assert len(before_pending) == 4

    store.put(make_run("new", "/data/new.csv"))  # the first write migrates
    con = duckdb.connect(str(store.db), read_only=True)
    assert con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() == (
        str(catalog.SCHEMA_VERSION),
    )
    columns = con.execute(
        "SELECT table_name FROM information_schema.columns WHERE column_name = 'mlflow_synced'"
    ).fetchall()
    assert columns == []
    queue = con.execute("SELECT sink, kind, key FROM pending ORDER BY kind DESC, key").fetchall()
    kept = {
        table: con.execute(
            f"SELECT * {'EXCLUDE (input_hash) ' if version == 1 else ''}FROM {table} ORDER BY 1"
        ).fetchall()
        for table in ("diagnoses", "comparisons")
    }
    runs = con.execute("SELECT run, content_hash, file FROM runs ORDER BY run").fetchall()
    con.close()
    assert queue == [("mlflow", kind, key) for kind, key in before_pending]
    assert kept == {t: held[t] for t in ("diagnoses", "comparisons")}  # nothing lost
    assert [r for r in runs if r[0] in {h[0] for h in held["runs"]}] == held["runs"]
    assert _pending(store) == before_pending
    # NULL stays "not pending", as the old reader saw it; the rest of each frame is unchanged
    assert _flags(store) == {k: v is not False for k, v in held["flags"].items()}
    for new, old in zip((store.diagnoses(), store.comparisons()), before, strict=True):
        assert new.drop("mlflow_synced").equals(old.drop("mlflow_synced"))
    assert store.get(held["runs"][0][0]).frame["value"].is_nan().sum() == 1

    # the migrated queue works as a queue: clear one item, a new result is pending again
    kind, key = before_pending[0]
    assert store.outbox.mark_synced(kind, key)
    assert _pending(store) == before_pending[1:]
    store.put_diagnosis(diagnosis(key, "loss_divergence"))
    assert _pending(store) == before_pending


def test_a_failed_migration_changes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The migration runs in the write session that opens the catalog: all or nothing."""
    path = tmp_path / "s"
    held = _old_store(path, 2)

    def drop_then_fail(con: duckdb.DuckDBPyConnection) -> None:
        con.execute("ALTER TABLE diagnoses DROP COLUMN mlflow_synced")
        raise duckdb.IOException("disk full")

    with monkeypatch.context() as patch:
        patch.setattr(catalog, "migrate", drop_then_fail)
        with pytest.raises(duckdb.IOException, match="disk full"):
            RunStore(path).put(make_run("new", "/data/new.csv"))
    store = RunStore(path)
    assert _flags(store) == held["flags"]
    con = duckdb.connect(str(store.db), read_only=True)
    assert con.execute("SELECT value FROM meta").fetchall() == [("2",)]
    assert (
        con.execute("SELECT * EXCLUDE (mlflow_synced) FROM diagnoses ORDER BY 1").fetchall()
        == held["diagnoses"]
    )
    con.close()
    store.put(make_run("new", "/data/new.csv"))  # the next writer migrates it
    assert len(_pending(store)) == 4


def test_each_sink_has_its_own_queue(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(catalog, "SINKS", ("mlflow", "archive"))
    store = RunStore(tmp_path / "s")
    run = make_run()
    store.put(run)
    store.put_diagnoses([(diagnosis(run.id), None)])
    key = store.put_comparison(comparison(run.id, ("f1",)))
    store.outbox.put_report("diagnosis", run.id, "<html>d</html>")
    mlflow, archive = store.outbox_for("mlflow"), store.outbox_for("archive")
    assert mlflow is store.outbox and archive.sink == "archive"
    assert store.diagnoses().select("mlflow_synced", "archive_synced").rows() == [(False, False)]

    assert mlflow.mark_synced("diagnosis", run.id)
    assert [p["key"] for p in mlflow.pending()] == [key]
    assert [p["key"] for p in archive.pending()] == [run.id, key]
    assert store.diagnoses().select("mlflow_synced", "archive_synced").rows() == [(True, False)]
    assert archive.report("diagnosis", run.id) == "<html>d</html>"  # archive still needs it

    assert archive.mark_synced("diagnosis", run.id, result=diagnosis(run.id).to_dict())
    assert archive.report("diagnosis", run.id) is None  # no sink has it pending any more
    assert store.comparisons().select("mlflow_synced", "archive_synced").rows() == [(False, False)]

    with pytest.raises(StoreError, match="unknown sink 'slack'"):
        store.outbox_for("slack")


def test_removing_a_run_empties_its_diagnosis_from_the_queue(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "s")
    keep, gone = make_run("keep", "/keep"), make_run("gone", "/gone")
    for run in (keep, gone):
        store.put(run)
        store.put_diagnosis(diagnosis(run.id))
    store.remove(gone.id)
    assert _pending(store) == [("diagnosis", keep.id)]
    con = duckdb.connect(str(store.db), read_only=True)
    assert con.execute("SELECT key FROM pending").fetchall() == [(keep.id,)]
    con.close()
    store.put(gone)  # back, undiagnosed: nothing of its old diagnosis waits
    assert _pending(store) == [("diagnosis", keep.id)]
    assert store.diagnoses().select("run", "mlflow_synced").rows() == [(keep.id, False)]


def test_the_pending_rows_of_a_batch_are_in_its_transaction(tmp_path: Path) -> None:
    """A batch whose insert fails leaves neither its results nor their queue items."""
    store = RunStore(tmp_path / "s")
    store.put(make_run())
    good = diagnosis("a")
    bad = diagnosis("b")
    object.__setattr__(bad, "onset_step", "not a step")  # DuckDB refuses it as BIGINT
    with pytest.raises(duckdb.Error):
        store.put_diagnoses([(good, None), (bad, None)])
    assert store.diagnoses().height == 0 and _pending(store) == []
    store.put_diagnoses([(good, None)])
    assert _pending(store) == [("diagnosis", "a")]
    assert store.diagnoses().filter(pl.col("run") == "a")["mlflow_synced"].to_list() == [False]
