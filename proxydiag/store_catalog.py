"""The store's DuckDB catalog: short connections, retried while another process holds the file.

DuckDB lets one process open a database read-write, and then no other process can open it at
all. So every statement group opens its own connection and closes it at once (a read-write
open, insert and close take ~30 ms, a read-only one ~20 ms), and a connection that meets a
lock held by another process retries with a short back-off until ``timeout_s``. Readers never
take the writer lock; they only ever wait for one catalog statement of a writer.
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import duckdb

from proxydiag.errors import StoreError

SCHEMA_VERSION = 1
CATALOG_NAME = "catalog.duckdb"

DDL = (
    "CREATE TABLE IF NOT EXISTS meta (key VARCHAR PRIMARY KEY, value VARCHAR)",
    """CREATE TABLE IF NOT EXISTS runs (
        run VARCHAR PRIMARY KEY, name VARCHAR, role VARCHAR, "group" VARCHAR, seed BIGINT,
        experts_kept DOUBLE, cost_per_step DOUBLE, precision VARCHAR, format VARCHAR,
        source VARCHAR, n_points BIGINT, n_metrics INTEGER, first_step BIGINT,
        last_step BIGINT, ingested_at TIMESTAMP, content_hash VARCHAR,
        schema_version INTEGER, file VARCHAR, attrs VARCHAR, mapping VARCHAR, events VARCHAR)""",
    """CREATE TABLE IF NOT EXISTS diagnoses (
        run VARCHAR PRIMARY KEY, label VARCHAR, onset_step BIGINT, confidence DOUBLE,
        json VARCHAR, mlflow_synced BOOLEAN, created_at TIMESTAMP)""",
    """CREATE TABLE IF NOT EXISTS comparisons (
        key VARCHAR PRIMARY KEY, proxy_run VARCHAR, full_runs VARCHAR[], fidelity DOUBLE,
        verdict VARCHAR, json VARCHAR, mlflow_synced BOOLEAN, created_at TIMESTAMP)""",
)

#: columns of ``RunStore.runs()``, in order
RUN_COLUMNS = (
    "run", "name", "role", "group", "seed", "experts_kept", "cost_per_step", "precision",
    "format", "source", "n_points", "n_metrics", "first_step", "last_step", "ingested_at",
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
            return duckdb.connect(str(db), read_only=read_only)
        except duckdb.IOException as exc:
            if not _is_lock_conflict(exc):
                raise StoreError(f"{db}: cannot open the catalog ({exc}); is it a proxydiag store?") from exc
            if time.monotonic() > deadline:
                raise StoreError(
                    f"{db}: the catalog stayed busy for {timeout_s:g} s; retry"
                ) from exc
        except duckdb.Error as exc:
            raise StoreError(f"{db}: cannot open the catalog ({exc}); is it a proxydiag store?") from exc
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
