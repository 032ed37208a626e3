"""MLflow SQL stores on SQLite (``sqlite:///path`` or the ``.db`` file), read with direct SQL.

``MlflowClient.get_metric_history`` builds one ``Metric`` object per point through SQLAlchemy
(~30 s per 10^6 points); this reader finds a run's keys by skip-scan and asks SQLite for each
(run, key) over MLflow's own index ``index_metrics_run_uuid_key_step``, moving the rows into
numpy without Python objects per column (≈ 0.7 s per 10^6 points on 2 cores). About 90% of
that is the ``sqlite3`` module handing over each point as a tuple of Python objects: the
floor of any reader on the standard library (reading Arrow columns straight from SQLite
needs DuckDB's ``sqlite`` extension, fetched from DuckDB's server, or an ADBC driver).

NaN comes from ``is_nan`` and ±inf from MLflow's ±1.7976931348623157e308 sentinel (see
:mod:`proxydiag.ingest.mlflow._meta`). Points are put in logging order (timestamp, then step)
so restarts are seen as in the UI.

Read options (``read_runs(uri, run_ids=[...], experiment="name")``) select runs; without them
every live run of the store is read. The file is opened read-only: a live server may keep
writing while we read.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from proxydiag.errors import IngestError
from proxydiag.ingest import ReadContext, is_uri
from proxydiag.ingest.mlflow._meta import (
    OWN_PREFIX,
    RUN_NAME_TAG,
    decode_values,
    has_points,
    proxydiag_run_id,
    run_attrs,
)
from proxydiag.run import Run
from proxydiag.run.build import build_run

NAME = "mlflow_sql"
_MAGIC = b"SQLite format 3\x00"
_SUFFIXES = (".db", ".sqlite", ".sqlite3")
_ROW = np.dtype([("step", "i8"), ("value", "f8"), ("is_nan", "i1"), ("timestamp", "i8")])


def sqlite_path(source: str | Path) -> Path:
    """The database file of a ``sqlite:///`` URI (SQLAlchemy rules) or a path.

    >>> str(sqlite_path("sqlite:////tmp/mlflow.db")), str(sqlite_path("sqlite:///mlflow.db"))
    ('/tmp/mlflow.db', 'mlflow.db')
    """
    text = str(source)
    return Path(text[len("sqlite:///") :]) if text.startswith("sqlite:///") else Path(text)


def can_read(source: str | Path) -> bool:
    """A ``sqlite:///`` URI, or a SQLite file holding MLflow's ``runs`` and ``metrics`` tables."""
    if isinstance(source, str) and source.startswith("sqlite:///"):
        return True
    if is_uri(source):
        return False
    path = Path(source)
    if path.suffix.lower() not in _SUFFIXES or not path.is_file():
        return False
    try:
        with path.open("rb") as fh:
            if fh.read(16) != _MAGIC:
                return False
        with _connect(path) as con:
            return {"runs", "metrics"} <= _tables(con)
    except (OSError, sqlite3.Error, IngestError):
        return False


def read(source: str | Path, ctx: ReadContext) -> list[Run]:
    """The selected runs (read options ``run_ids``, ``experiment``), or all live runs."""
    path = sqlite_path(source)
    if not path.is_file():
        raise IngestError(f"{path}: no such SQLite file (from {source})")
    uri = f"sqlite:///{path.resolve()}"
    with _connect(path) as con:
        if not {"runs", "metrics"} <= _tables(con):
            raise IngestError(f"{path}: not an MLflow store (no 'runs' and 'metrics' tables)")
        rows = _select_runs(
            con,
            run_ids=ctx.options.get("run_ids"),
            experiment=ctx.options.get("experiment"),
            where=str(path),
        )
        runs = [_read_run(con, row, ctx, uri=uri, path=path) for row in rows]
    return [run for run in runs if run is not None]


@contextmanager
def _connect(path: Path) -> Iterator[sqlite3.Connection]:
    try:
        con = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=10.0)
    except sqlite3.Error as exc:
        raise IngestError(f"{path}: cannot open SQLite store ({exc})") from exc
    try:
        yield con
    except sqlite3.DatabaseError as exc:
        raise IngestError(f"{path}: SQLite error ({exc}); is it an MLflow store?") from exc
    finally:
        con.close()


def _tables(con: sqlite3.Connection) -> set[str]:
    return {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}


def _select_runs(
    con: sqlite3.Connection, *, run_ids: Sequence[str] | None, experiment: str | None, where: str
) -> list[tuple[Any, ...]]:
    sql = (
        "SELECT r.run_uuid, r.name, r.experiment_id, e.name FROM runs r "
        "LEFT JOIN experiments e ON e.experiment_id = r.experiment_id "
    )
    if run_ids is not None:
        ids = list(run_ids)
        rows = con.execute(
            sql + f"WHERE r.run_uuid IN ({','.join('?' * len(ids))})", ids
        ).fetchall()
        missing = sorted(set(ids) - {r[0] for r in rows})
        if missing:
            raise IngestError(f"{where}: no MLflow run {missing[0]!r} in this store")
        return sorted(rows, key=lambda r: ids.index(r[0]))
    sql += "WHERE r.lifecycle_stage = 'active'"
    args: list[Any] = []
    if experiment is not None:
        sql += " AND e.name = ?"
        args.append(experiment)
    return con.execute(sql + " ORDER BY r.start_time, r.run_uuid", args).fetchall()


def _read_run(
    con: sqlite3.Connection, row: tuple[Any, ...], ctx: ReadContext, *, uri: str, path: Path
) -> Run | None:
    mlflow_id, run_name, experiment_id, experiment = row
    raw = _metrics(con, mlflow_id)
    if not has_points(raw, where=f"{path} run {mlflow_id}"):
        return None
    params = dict(con.execute("SELECT key, value FROM params WHERE run_uuid = ?", (mlflow_id,)))
    tags = dict(con.execute("SELECT key, value FROM tags WHERE run_uuid = ?", (mlflow_id,)))
    name = tags.get(RUN_NAME_TAG) or run_name or mlflow_id
    attrs = run_attrs(
        mlflow_run_id=mlflow_id,
        experiment_id=str(experiment_id),
        tracking_uri=uri,
        params=params,
        tags=tags,
        where=f"{path} run {mlflow_id}",
    )
    attrs.update(run_id=proxydiag_run_id(name, mlflow_id), mlflow_experiment=experiment)
    return build_run(
        raw, name=name, source=f"{uri}#{mlflow_id}", fmt=NAME, aliases=ctx.aliases, attrs=attrs
    )


#: a run's distinct keys by skip-scan over ``index_metrics_run_uuid_key_step``: one index
#: seek per key, where ``SELECT DISTINCT`` walks every point of the run
_KEYS = """
WITH RECURSIVE k(key) AS (
    SELECT min(key) FROM metrics WHERE run_uuid = ?1
    UNION ALL
    SELECT (SELECT min(key) FROM metrics WHERE run_uuid = ?1 AND key > k.key) FROM k
    WHERE k.key IS NOT NULL
)
SELECT key FROM k WHERE key IS NOT NULL
"""


def _metrics(con: sqlite3.Connection, mlflow_id: str) -> pl.DataFrame:
    """The raw frame of one run: one indexed query per key, rows straight into numpy, each
    key's points in logging order, then the keys' points side by side."""
    keys = sorted(k for (k,) in con.execute(_KEYS, (mlflow_id,)) if not k.startswith(OWN_PREFIX))
    if not keys:
        return pl.DataFrame(
            schema={"step": pl.Int64, "key": pl.Utf8, "value": pl.Float64, "wall_time": pl.Float64}
        )
    parts = [_points(con, mlflow_id, key) for key in keys]
    sizes = [len(p) for p in parts]
    arr = np.concatenate(parts)
    del parts  # the run's points are held once, then once more in the frame
    frame = pl.DataFrame({name: arr[name] for name in ("step", "value", "is_nan", "timestamp")})
    del arr
    index = pl.Series("k", np.repeat(np.arange(len(keys), dtype=np.uint32), sizes))
    return frame.select(
        "step",
        pl.Series("key", keys, dtype=pl.Utf8).gather(index),
        decode_values(pl.col("value"), pl.col("is_nan")),
        (pl.col("timestamp").cast(pl.Float64) / 1000.0).alias("wall_time"),
    )


def _points(con: sqlite3.Connection, mlflow_id: str, key: str) -> np.ndarray:
    """One key's points in logging order (timestamp, then step; ties as stored)."""
    arr = np.fromiter(
        con.execute(
            "SELECT step, value, is_nan, timestamp FROM metrics WHERE run_uuid = ? AND key = ?",
            (mlflow_id, key),
        ),
        dtype=_ROW,
    )
    ts, step = arr["timestamp"], arr["step"]
    ordered = bool(np.all((ts[1:] > ts[:-1]) | ((ts[1:] == ts[:-1]) & (step[1:] >= step[:-1]))))
    return arr if ordered else arr[np.lexsort((step, ts))]  # lexsort is stable
