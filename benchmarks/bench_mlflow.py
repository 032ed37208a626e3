"""MLflow: proxydiag's readers vs MLflow's own client, on a SQL store, a file store and a server.

Inputs (generated, cached under ``benchmarks/.cache``): one run of 50 keys × 20,000 steps
(1,000,000 points; smoke: 5 × 200) with NaN and ±inf sprinkled in, in

- a sqlite store: MLflow creates the store, experiment and run (``MlflowClient``); the metric
  rows are bulk-inserted with ``sqlite3`` in MLflow's own encoding (NaN as ``is_nan``, ±inf as
  ±1.7976931348623157e308, plus ``latest_metrics``) because logging 10^6 points through the
  client takes minutes. ``tests/ingest/mlflow/test_mlflow_sql.py`` checks the reader on
  client-written rows.
- a file store: MLflow creates the run folder; the metric files are written in MLflow's
  ``"<ts> <value> <step>"`` line format.
- a tracking server (``mlflow server`` with its default workers, on a copy of a sqlite store
  of its own) for a smaller run of 10 keys × 10,000 steps (smoke: 2 × 200): each client
  reads the complete history.

``MlflowClient.get_metric_history`` on the stores is measured on 5 of the 50 keys and scaled
×10 (it needs ~30 s per 10^6 points); the note says so.

An experiment as a fleet (:func:`_experiment_rows`): 200 small runs × 5 keys × 200 steps
(smoke: 10 runs) in a server's sqlite store. ``proxydiag ingest --mlflow-experiment`` with
``--workers 1`` and ``--workers 2`` into a fresh store, against ``MlflowClient`` fetching the
same histories (``search_runs``, then ``get_metric_history`` per key per run), each a fresh
process (interpreter and import start-up included on both sides); runs per second in the note.
"""

from __future__ import annotations

import math
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.common import Context, Row, alternate, peak_rss_mb
from proxydiag.testing.mlflow_server import SERVER_ENV, start

QUIET = {**SERVER_ENV, "MLFLOW_ALLOW_FILE_STORE": "true"}  # the clients' side too
SQL_INF = 1.7976931348623157e308


def _values(n_keys: int, n_steps: int, seed: int) -> np.ndarray:
    values = np.random.default_rng(seed).normal(size=(n_keys, n_steps))
    values[:, 7::997] = math.nan
    values[:, 11::1999] = math.inf
    values[:, 13::2999] = -math.inf
    return values


def make_sqlite(path: Path, runs: dict[str, tuple[int, int]]) -> tuple[str, dict[str, str]]:
    """A sqlite store with one run per ``name: (keys, steps)``; returns (uri, name -> run id)."""
    from mlflow import MlflowClient

    uri = f"sqlite:///{path}"
    client = MlflowClient(uri)
    exp = client.create_experiment("bench", artifact_location=(path.parent / "art").as_uri())
    ids = {
        name: client.create_run(exp, run_name=name, tags={"role": "proxy"}).info.run_id
        for name in runs
    }
    with sqlite3.connect(path) as con:
        for seed, (name, (n_keys, n_steps)) in enumerate(runs.items()):
            rid = ids[name]
            values = _values(n_keys, n_steps, seed)
            for k in range(n_keys):
                rows = _sql_rows(f"actor/metric_{k:02d}", values[k], rid)
                con.executemany(
                    "INSERT INTO metrics (key, value, timestamp, run_uuid, step, is_nan)"
                    " VALUES (?, ?, ?, ?, ?, ?)",
                    rows,
                )
                con.execute(
                    "INSERT INTO latest_metrics (key, value, timestamp, step, is_nan, "
                    "run_uuid) VALUES (?, ?, ?, ?, ?, ?)",
                    (rows[-1][0], rows[-1][1], rows[-1][2], rows[-1][4], rows[-1][5], rid),
                )
    return uri, ids


def _sql_rows(key: str, values: np.ndarray, rid: str) -> list[tuple[Any, ...]]:
    rows = []
    for step, v in enumerate(values.tolist()):
        nan = v != v
        stored = 0.0 if nan else max(-SQL_INF, min(SQL_INF, v))
        rows.append((key, stored, 1_700_000_000_000 + step, rid, step, int(nan)))
    return rows


def make_file_store(root: Path, n_keys: int, n_steps: int) -> tuple[Path, str]:
    from mlflow import MlflowClient

    client = MlflowClient(root.as_uri())
    run = client.create_run(client.create_experiment("bench"), run_name="big")
    run_dir = next(root.glob(f"*/{run.info.run_id}"))
    values = _values(n_keys, n_steps, 0)
    for k in range(n_keys):
        path = run_dir / "metrics" / "actor" / f"metric_{k:02d}"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(
            "".join(
                f"{1_700_000_000_000 + s} {v!r} {s}\n" for s, v in enumerate(values[k].tolist())
            )
        )
    return run_dir, run.info.run_id


def _inputs(ctx: Context) -> dict[str, Any]:
    keys, steps = ctx.size(50, 5), ctx.size(20_000, 200)
    server_keys, server_steps = ctx.size(10, 2), ctx.size(10_000, 200)
    base = ctx.cache / f"mlflow-{keys}x{steps}"
    done = base / "done-v2"  # v2: the server's run in a store of its own
    if not done.exists():
        shutil.rmtree(base, ignore_errors=True)
        base.mkdir(parents=True)
        make_sqlite(base / "mlflow.db", {"big": (keys, steps)})
        make_sqlite(base / "server-src.db", {"server": (server_keys, server_steps)})
        make_file_store(base / "mlruns", keys, steps)
        done.write_text("ok")
    uri = f"sqlite:///{base / 'mlflow.db'}"
    ids = {**_run_ids(uri), **_run_ids(f"sqlite:///{base / 'server-src.db'}")}
    run_dir = next(p for p in (base / "mlruns").glob("*/*") if (p / "metrics").is_dir())
    return {
        "base": base,
        "uri": uri,
        "ids": ids,
        "keys": keys,
        "steps": steps,
        "run_dir": run_dir,
        "server_points": server_keys * server_steps,
    }


def _run_ids(uri: str) -> dict[str, str]:
    from mlflow import MlflowClient

    client = MlflowClient(uri)
    experiment = client.get_experiment_by_name("bench").experiment_id  # type: ignore[union-attr]
    return {r.info.run_name: r.info.run_id for r in client.search_runs([experiment])}


def run(ctx: Context) -> list[Row]:
    os.environ.update(QUIET)
    data = _inputs(ctx)
    rows = _sqlite_rows(ctx, data) + _file_rows(ctx, data)
    return rows + _server_rows(ctx, data) + _experiment_rows(ctx)


def _history_loop(client: Any, rid: str, keys: list[str]) -> int:
    return sum(len(client.get_metric_history(rid, k)) for k in keys)


def _sqlite_rows(ctx: Context, data: dict[str, Any]) -> list[Row]:
    import mlflow
    from mlflow import MlflowClient

    from proxydiag.ingest import ReadContext
    from proxydiag.ingest.mlflow import sql as mlflow_sql

    uri, rid, n = data["uri"], data["ids"]["big"], data["keys"] * data["steps"]
    client = MlflowClient(uri)
    sub = [f"actor/metric_{k:02d}" for k in range(min(5, data["keys"]))]
    scale = data["keys"] / len(sub)
    opts = ReadContext(options={"run_ids": [rid]})
    mlflow.set_tracking_uri(uri)
    db = str(data["base"] / "mlflow.db")
    times = alternate(
        {
            "proxydiag": lambda: mlflow_sql.read(uri, opts),
            "get_metric_history": lambda: _history_loop(client, rid, sub),
            "mlflow.search_runs": lambda: mlflow.search_runs(search_all_experiments=True),
            "sqlite3 fetchall": lambda: (
                sqlite3.connect(db)
                .execute(
                    "SELECT key, step, value, is_nan, timestamp FROM metrics WHERE run_uuid = ?",
                    (rid,),
                )
                .fetchall()
            ),
        },
        repeat=ctx.repeat,
    )
    group = f"mlflow sqlite store, {n:,} points"
    read = "mlflow_sql.read({uri!r}, ReadContext(options={{'run_ids': [{rid!r}]}}))[0]"
    peak = peak_rss_mb(
        f"run = {read.format(uri=uri, rid=rid)}",
        warm="from proxydiag.ingest import ReadContext\n"
        "from proxydiag.ingest.mlflow import sql as mlflow_sql\n"
        + read.format(uri=f"sqlite:///{data['base'] / 'server-src.db'}", rid=data["ids"]["server"]),
    )
    return [
        Row(
            group,
            "proxydiag",
            times["proxydiag"],
            n,
            peak_mb=peak.mb,
            note=f"direct SQL per key into numpy, canonical frame out; {peak.note}",
        ),
        Row(
            group,
            "MlflowClient.get_metric_history",
            [t * scale for t in times["get_metric_history"]],
            n,
            note=f"measured on {len(sub)} of {data['keys']} keys, scaled ×{scale:g}",
        ),
        Row(
            group,
            "mlflow.search_runs",
            times["mlflow.search_runs"],
            0,
            note="latest value per key only, not the history",
        ),
        Row(
            group,
            "sqlite3 fetchall",
            times["sqlite3 fetchall"],
            n,
            note="floor: rows as Python tuples, no decoding",
        ),
    ]


def _file_rows(ctx: Context, data: dict[str, Any]) -> list[Row]:
    import polars as pl
    from mlflow import MlflowClient

    from proxydiag.ingest import ReadContext
    from proxydiag.ingest.mlflow import files as mlflow_files

    run_dir, n = data["run_dir"], data["keys"] * data["steps"]
    client = MlflowClient(run_dir.parent.parent.as_uri())
    sub = [f"actor/metric_{k:02d}" for k in range(min(5, data["keys"]))]
    scale = data["keys"] / len(sub)
    files = sorted((run_dir / "metrics" / "actor").iterdir())
    schema = {"ts": pl.Int64, "value": pl.Float64, "step": pl.Int64}

    def polars_alone() -> pl.DataFrame:
        return pl.concat(
            [pl.read_csv(f, has_header=False, separator=" ", schema=schema) for f in files]
        )

    times = alternate(
        {
            "proxydiag": lambda: mlflow_files.read(run_dir, ReadContext()),
            "polars alone": polars_alone,
            "get_metric_history": lambda: _history_loop(client, run_dir.name, sub),
        },
        repeat=ctx.repeat,
    )
    group = f"mlflow file store, {n:,} points"
    return [
        Row(group, "proxydiag", times["proxydiag"], n, note="one polars parse of all files"),
        Row(
            group,
            "polars alone (read_csv per file)",
            times["polars alone"],
            n,
            note="no keys, no checks",
        ),
        Row(
            group,
            "MlflowClient.get_metric_history",
            [t * scale for t in times["get_metric_history"]],
            n,
            note=f"measured on {len(sub)} of {data['keys']} keys, scaled ×{scale:g}",
        ),
    ]


def _server_rows(ctx: Context, data: dict[str, Any]) -> list[Row]:
    from mlflow import MlflowClient

    from proxydiag.ingest.mlflow import uri as mlflow_uri

    db = data["base"] / "server.db"  # the server may migrate or write: a copy of the small store
    shutil.copyfile(data["base"] / "server-src.db", db)
    # the server's default worker count (4), as users run it; the sequential baseline cannot
    # use more than one, concurrent requests can
    with start(data["base"], db=db, workers=None) as server:
        rid, n = data["ids"]["server"], data["server_points"]
        client = MlflowClient(server.uri)
        keys = sorted(client.get_run(rid).data.metrics)
        times = alternate(
            {
                "proxydiag": lambda: mlflow_uri.read_mlflow_runs(server.uri, [rid]),
                "sequential": lambda: _history_loop(client, rid, keys),
            },
            repeat=ctx.repeat,
        )
    group = f"mlflow tracking server, {n:,} points"
    return [
        Row(
            group,
            "proxydiag",
            times["proxydiag"],
            n,
            note="one bulk history request per key (paged get-history from 25,000 points), "
            "8 concurrent, completeness checked",
        ),
        Row(group, "get_metric_history loop", times["sequential"], n, note="one key after another"),
    ]


# -- an experiment of many small runs, ingested as a fleet --------------------------------

_CLIENT_LOOP = """
import sys
from mlflow import MlflowClient
client = MlflowClient(sys.argv[1])
exp = client.get_experiment_by_name("bench").experiment_id
points, token = 0, None
while True:
    page = client.search_runs([exp], max_results=1000, page_token=token)
    for run in page:
        for key in run.data.metrics:
            points += len(client.get_metric_history(run.info.run_id, key))
    token = page.token
    if not token:
        break
print(points)
"""


def _experiment_rows(ctx: Context) -> list[Row]:
    n_runs, n_keys, n_steps = ctx.size(200, 10), 5, 200
    base = ctx.cache / f"mlflow-experiment-{n_runs}x{n_keys}x{n_steps}"
    if not (base / "done").exists():
        shutil.rmtree(base, ignore_errors=True)
        base.mkdir(parents=True)
        make_sqlite(base / "src.db", {f"r{i:04d}": (n_keys, n_steps) for i in range(n_runs)})
        (base / "done").write_text("ok")
    db = base / "server.db"  # the server may migrate or write: a copy
    shutil.copyfile(base / "src.db", db)
    points = n_runs * n_keys * n_steps
    env = {**os.environ, **QUIET}
    env.pop("MLFLOW_TRACKING_URI", None)

    def ingest(uri: str, workers: int) -> int:
        with tempfile.TemporaryDirectory(dir=base) as tmp:
            args = ["ingest", "--mlflow-experiment", "bench", "--tracking-uri", uri]
            args += ["--store", f"{tmp}/store", "--workers", str(workers)]
            subprocess.run(
                [sys.executable, "-m", "proxydiag", *args],
                check=True,
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
            )
            from proxydiag.store import RunStore

            stored = RunStore(f"{tmp}/store").runs()
            assert stored.height == n_runs, stored.height
            return int(stored["n_points"].sum())

    def client(uri: str) -> int:
        out = subprocess.run(
            [sys.executable, "-c", _CLIENT_LOOP, uri],
            check=True,
            env=env,
            capture_output=True,
            text=True,
        )
        return int(out.stdout.strip())

    def check(name: str, got: int) -> None:
        assert got == points, (name, got, points)

    with start(base, db=db, workers=None) as server:
        times = alternate(
            {
                "proxydiag": lambda: ingest(server.uri, 1),
                "proxydiag --workers 2": lambda: ingest(server.uri, 2),
                "MlflowClient": lambda: client(server.uri),
            },
            repeat=min(ctx.repeat, 3),
            check=check,
        )
    group = f"mlflow experiment, {n_runs} runs × {n_keys} keys × {n_steps} steps (server)"

    def rate(name: str) -> str:
        return f"{n_runs / sorted(times[name])[len(times[name]) // 2]:.1f} runs/s"

    return [
        Row(
            group,
            "proxydiag",
            times["proxydiag"],
            points,
            note=f"{rate('proxydiag')}; `proxydiag ingest --mlflow-experiment --workers 1` "
            "into a fresh store",
        ),
        Row(
            group,
            "proxydiag --workers 2",
            times["proxydiag --workers 2"],
            points,
            note=f"{rate('proxydiag --workers 2')}; the same on 2 worker processes",
        ),
        Row(
            group,
            "MlflowClient loop",
            times["MlflowClient"],
            points,
            note=f"{rate('MlflowClient')}; search_runs + get_metric_history per key per run, "
            "nothing stored",
        ),
    ]
