"""The store's DuckDB catalog: short connections, retried while another process holds the file.

DuckDB lets one process open a database read-write, and then no other process can open it at
all. So every statement group opens its own connection and closes it at once (a read-write
open, insert and close take ~30 ms, a read-only one ~20 ms on an idle machine, 3-5× that on
a loaded one: per-connection start-up dominates), and a connection that meets a
lock held by another process retries with a short back-off until ``timeout_s``. Readers never
take the writer lock; they only ever wait for one catalog statement of a writer.
"""

from __future__ import annotations

import datetime as dt
import json
import random
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import duckdb
import polars as pl

from proxydiag.errors import StoreError
from proxydiag.run import Run

#: 2 added the columns of :data:`GROWN` (a store of schema 1 is grown when next written); 3
#: moved the results' ``mlflow_synced`` columns into the ``pending`` queue (:func:`migrate`)
SCHEMA_VERSION = 3
CATALOG_NAME = "catalog.duckdb"
#: small tables: one thread, and never reach for DuckDB's extension server
_CONFIG = {"threads": 1, "autoload_known_extensions": False, "autoinstall_known_extensions": False}

DDL = (
    "CREATE TABLE IF NOT EXISTS meta (key VARCHAR PRIMARY KEY, value VARCHAR)",
    """CREATE TABLE IF NOT EXISTS runs (
        run VARCHAR PRIMARY KEY, name VARCHAR, role VARCHAR, "group" VARCHAR, seed BIGINT,
        experts_kept DOUBLE, cost_per_step DOUBLE, precision VARCHAR, format VARCHAR,
        source VARCHAR, n_points BIGINT, n_metrics INTEGER, first_step BIGINT,
        last_step BIGINT, ingested_at TIMESTAMP, content_hash VARCHAR,
        schema_version INTEGER, file VARCHAR, attrs VARCHAR, mapping VARCHAR, events VARCHAR,
        experts_total DOUBLE)""",
    # added after schema 1 was released: a catalog written before gains the column (NULL)
    "ALTER TABLE runs ADD COLUMN IF NOT EXISTS experts_total DOUBLE",
    """CREATE TABLE IF NOT EXISTS diagnoses (
        run VARCHAR PRIMARY KEY, label VARCHAR, onset_step BIGINT, confidence DOUBLE,
        json VARCHAR, created_at TIMESTAMP)""",
    """CREATE TABLE IF NOT EXISTS comparisons (
        key VARCHAR PRIMARY KEY, proxy_run VARCHAR, full_runs VARCHAR[], fidelity DOUBLE,
        verdict VARCHAR, json VARCHAR, created_at TIMESTAMP)""",
    # what each sink still has to send: one row per (sink, result kind, result key), written
    # in the transaction that stores the result, deleted when the sink has accepted it
    """CREATE TABLE IF NOT EXISTS pending (
        sink VARCHAR, kind VARCHAR, key VARCHAR, PRIMARY KEY (sink, kind, key))""",
)

#: the sinks every stored result waits for, until each has accepted it (a sink named here
#: has an outbox, ``RunStore.outbox_for(name)``; results stored before it was added are not
#: queued for it)
MLFLOW = "mlflow"
SINKS = (MLFLOW,)
#: the result kinds, and their table and key column
RESULT_TABLES = {"diagnosis": ("diagnoses", "run"), "comparison": ("comparisons", "key")}

#: columns added since schema 1, never removed: where a run's source was read from and the
#: digest of that source's content and reading configuration (a fleet ingest skips a source
#: whose digest is unchanged), and the digest of a result's inputs (run content, config,
#: proxydiag version: a fleet diagnose/compare reuses a result whose inputs are unchanged)
GROWN = (
    "ALTER TABLE runs ADD COLUMN IF NOT EXISTS source_key VARCHAR",
    "ALTER TABLE runs ADD COLUMN IF NOT EXISTS source_hash VARCHAR",
    "ALTER TABLE diagnoses ADD COLUMN IF NOT EXISTS input_hash VARCHAR",
    "ALTER TABLE comparisons ADD COLUMN IF NOT EXISTS input_hash VARCHAR",
)

#: columns of ``RunStore.runs()``, in order
RUN_COLUMNS = (
    "run",
    "name",
    "role",
    "group",
    "seed",
    "experts_kept",
    "cost_per_step",
    "precision",
    "format",
    "source",
    "n_points",
    "n_metrics",
    "first_step",
    "last_step",
    "ingested_at",
    "experts_total",
)


def _is_lock_conflict(exc: duckdb.Error) -> bool:
    text = str(exc).lower()
    return "lock" in text and ("conflicting" in text or "could not set" in text)


def connect(db: Path, *, read_only: bool, timeout_s: float) -> duckdb.DuckDBPyConnection:
    """Open the catalog, retrying while another process holds it (up to ``timeout_s``)."""
    deadline = time.monotonic() + timeout_s
    delay = 0.005
    while True:
        try:
            return duckdb.connect(str(db), read_only=read_only, config=dict(_CONFIG))
        except duckdb.IOException as exc:
            if not _is_lock_conflict(exc):
                raise StoreError(
                    f"{db}: cannot open the catalog ({exc}); is it a proxydiag store?"
                ) from exc
            if time.monotonic() > deadline:
                raise StoreError(
                    f"{db}: the catalog stayed busy for {timeout_s:g} s; retry"
                ) from exc
        except duckdb.Error as exc:
            raise StoreError(
                f"{db}: cannot open the catalog ({exc}); is it a proxydiag store?"
            ) from exc
        time.sleep(delay * (0.5 + random.random()))
        delay = min(delay * 2, 0.1)


@contextmanager
def session(db: Path, *, read_only: bool, timeout_s: float) -> Iterator[duckdb.DuckDBPyConnection]:
    """A connection for a few statements; a read-write session is one transaction."""
    con = connect(db, read_only=read_only, timeout_s=timeout_s)
    try:
        if read_only:
            check_version(con, db)
            yield con
        else:
            # closing checkpoints the WAL into the file: skipping that makes a write ~20%
            # cheaper but every later open replay the WAL (reads twice as slow), so keep it
            con.execute("BEGIN TRANSACTION")
            yield con
            con.execute("COMMIT")
    finally:
        con.close()


def create(con: duckdb.DuckDBPyConnection, db: Path) -> None:
    """Create missing tables and record the schema version (inside a write session)."""
    for statement in DDL:
        con.execute(statement)
    con.execute(
        "INSERT INTO meta VALUES ('schema_version', ?) ON CONFLICT DO NOTHING",
        [str(SCHEMA_VERSION)],
    )
    check_version(con, db)
    for statement in GROWN:
        con.execute(statement)
    migrate(con)
    con.execute(
        "UPDATE meta SET value = ? WHERE key = 'schema_version' AND CAST(value AS INTEGER) < ?",
        [str(SCHEMA_VERSION), SCHEMA_VERSION],
    )


def migrate(con: duckdb.DuckDBPyConnection) -> None:
    """Move a catalog of schema 1 or 2 to the ``pending`` queue (inside the write session that
    creates it, so all or nothing): a result whose ``mlflow_synced`` is false becomes a pending
    item of the ``mlflow`` sink (as before, a NULL flag is not pending), then the column goes."""
    for kind, (table, column) in RESULT_TABLES.items():
        found = con.execute(
            "SELECT count(*) FROM information_schema.columns "
            "WHERE table_name = ? AND column_name = 'mlflow_synced'",
            [table],
        ).fetchone()
        if not found or not found[0]:
            continue
        con.execute(
            f"INSERT OR IGNORE INTO pending (sink, kind, key) SELECT ?, ?, {column} "
            f"FROM {table} WHERE mlflow_synced = false",
            [MLFLOW, kind],
        )
        con.execute(f"ALTER TABLE {table} DROP COLUMN mlflow_synced")


def enqueue(con: duckdb.DuckDBPyConnection, kind: str, keys: list[str]) -> None:
    """Queue the results ``keys`` of ``kind`` for every sink (inside the write session that
    stores them; a result already queued stays queued once). One statement whatever the
    number of keys (~5 ms for 250, where a VALUES list takes ~25 ms)."""
    if not keys:
        return
    con.execute(
        "INSERT OR IGNORE INTO pending (sink, kind, key) SELECT s.sink, ?, k.key "
        "FROM unnest(?::VARCHAR[]) AS s(sink), unnest(?::VARCHAR[]) AS k(key)",
        [kind, list(SINKS), keys],
    )


def check_version(con: duckdb.DuckDBPyConnection, db: Path) -> None:
    try:
        row = con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    except duckdb.CatalogException as exc:
        raise StoreError(f"{db}: not a proxydiag catalog (no meta table)") from exc
    version = int(row[0]) if row else 0
    if version > SCHEMA_VERSION:
        raise StoreError(
            f"{db}: written by a newer proxydiag (schema {version} > {SCHEMA_VERSION}); upgrade"
        )


def now() -> dt.datetime:
    """UTC now, naive (DuckDB TIMESTAMP)."""
    return dt.datetime.now(dt.UTC).replace(tzinfo=None)


#: the columns ``upsert_run`` writes, in order
_WRITTEN = (
    *RUN_COLUMNS,
    "content_hash",
    "schema_version",
    "file",
    "attrs",
    "mapping",
    "events",
    "source_key",
    "source_hash",
)


def run_row(run: Run, *, file: str, digest: str) -> dict[str, Any]:
    """The catalog row of ``run`` without ``ingested_at``, ``source_key`` and ``source_hash``
    (what a worker that staged the run's file sends the driver)."""
    attrs = run.attrs
    frame = run.frame
    steps = frame["step"]
    return {
        "run": run.id,
        "name": run.name,
        "role": _text(attrs.get("role")),
        "group": _text(attrs.get("group")),
        "seed": _int(attrs.get("seed")),
        "experts_kept": _float(attrs.get("experts_kept")),
        "cost_per_step": _float(attrs.get("cost_per_step")),
        "precision": _text(attrs.get("precision")),
        "format": _text(attrs.get("format")),
        "source": _text(attrs.get("source")),
        "n_points": frame.height,
        "n_metrics": frame["metric"].n_unique(),
        "first_step": steps.min() if frame.height else None,
        "last_step": steps.max() if frame.height else None,
        "experts_total": _float(attrs.get("experts_total")),
        "content_hash": digest,
        "schema_version": SCHEMA_VERSION,
        "file": file,
        "attrs": json.dumps(attrs, default=str),
        "mapping": json.dumps(run.mapping),
        "events": json.dumps([e.to_dict() for e in run.events]),
    }


def upsert_run(
    con: duckdb.DuckDBPyConnection,
    run: Run,
    *,
    path: Path,
    digest: str,
    source_key: str | None = None,
    source_hash: str | None = None,
) -> None:
    """Replace the catalog row of ``run`` (inside a write session)."""
    row = run_row(run, file=path.name, digest=digest)
    upsert_rows(con, [dict(row, source_key=source_key, source_hash=source_hash)])


def upsert_rows(con: duckdb.DuckDBPyConnection, rows: list[dict[str, Any]]) -> None:
    """Replace the catalog rows of many runs at once (inside a write session; run ids
    distinct): one DELETE and one INSERT, whatever the number of rows."""
    if not rows:
        return
    at = now()
    names = ", ".join(f'"{c}"' for c in _WRITTEN)
    values = [[at if c == "ingested_at" else row.get(c) for c in _WRITTEN] for row in rows]
    con.execute("DELETE FROM runs WHERE run IN (SELECT unnest(?))", [[r["run"] for r in rows]])
    insert_many(con, f"INSERT INTO runs ({names})", values)


def insert_many(con: duckdb.DuckDBPyConnection, head: str, values: list[list[Any]]) -> None:
    """``head VALUES (...), (...), ...`` for many rows, in statements of at most 200 rows
    (DuckDB's ``executemany`` costs ~10 ms a row: one statement per row)."""
    for at in range(0, len(values), 200):
        chunk = values[at : at + 200]
        row = f"({', '.join(['?'] * len(chunk[0]))})"
        con.execute(f"{head} VALUES {', '.join([row] * len(chunk))}", [v for r in chunk for v in r])


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def _int(value: Any) -> int | None:
    try:
        return None if value is None else int(value)
    except (TypeError, ValueError):
        return None


def _float(value: Any) -> float | None:
    try:
        return None if value is None else float(value)
    except (TypeError, ValueError):
        return None


RUNS_SCHEMA: dict[str, pl.DataType] = {
    "run": pl.Utf8(),
    "name": pl.Utf8(),
    "role": pl.Utf8(),
    "group": pl.Utf8(),
    "seed": pl.Int64(),
    "experts_kept": pl.Float64(),
    "cost_per_step": pl.Float64(),
    "precision": pl.Utf8(),
    "format": pl.Utf8(),
    "source": pl.Utf8(),
    "n_points": pl.Int64(),
    "n_metrics": pl.Int64(),
    "first_step": pl.Int64(),
    "last_step": pl.Int64(),
    "ingested_at": pl.Datetime("us"),
    "experts_total": pl.Float64(),
}
#: the columns ``RunStore.diagnoses()`` / ``comparisons()`` read from each result table
RESULT_COLUMNS: dict[str, dict[str, pl.DataType]] = {
    "diagnosis": {
        "run": pl.Utf8(),
        "label": pl.Utf8(),
        "onset_step": pl.Int64(),
        "confidence": pl.Float64(),
        "json": pl.Utf8(),
    },
    "comparison": {
        "proxy_run": pl.Utf8(),
        "full_runs": pl.List(pl.Utf8()),
        "fidelity": pl.Float64(),
        "verdict": pl.Utf8(),
        "json": pl.Utf8(),
    },
}


def result_schema(kind: str) -> dict[str, pl.DataType]:
    """The columns of ``RunStore.diagnoses()`` / ``comparisons()``: the result's key columns
    and JSON, then one flag per sink, derived from the queue (true once the sink has accepted
    the result: ``mlflow_synced``)."""
    return {**RESULT_COLUMNS[kind], **{f"{sink}_synced": pl.Boolean() for sink in SINKS}}
