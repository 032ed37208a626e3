"""MLflow SQL stores (sqlite), written by the real MLflow client, read with direct SQL."""

from __future__ import annotations

import math
import sqlite3
import time
from pathlib import Path

import numpy as np
import pytest
from mlflow_fixtures import QUIET_ENV

from proxydiag.errors import IngestError, MlflowError
from proxydiag.ingest import ReadContext
from proxydiag.ingest.mlflow import sql as mlflow_sql
from proxydiag.ingest.mlflow import uri as mlflow_uri

VALUES = [0.5, float("nan"), float("inf"), float("-inf"), 1.7976931348623157e307, -2.25]


@pytest.fixture(scope="module")
def sql_store(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, list[str]]:
    """A sqlite store with a full run, a proxy run (one restart), and a deleted run."""
    from mlflow import MlflowClient
    from mlflow.entities import Metric, Param

    with pytest.MonkeyPatch.context() as mp:
        for key, value in QUIET_ENV.items():
            mp.setenv(key, value)
        uri = f"sqlite:///{tmp_path_factory.mktemp('sql') / 'mlflow.db'}"
        client = MlflowClient(uri)
        exp = client.create_experiment("sweep")
        other = client.create_experiment("other")
        ts = int(time.time() * 1000)
        full = client.create_run(exp, run_name="full", tags={"role": "full", "group": "g1"})
        client.log_batch(
            full.info.run_id,
            params=[Param("experts_kept", "64")],
            metrics=[Metric("actor/pg_loss", v, ts + s, s) for s, v in enumerate(VALUES)],
        )
        proxy = client.create_run(exp, run_name="proxy", tags={"role": "proxy", "seed": "3"})
        steps = [0, 1, 2, 3, 2, 3, 4]  # the job restarted from step 2
        client.log_batch(
            proxy.info.run_id,
            metrics=[Metric("actor/grad_norm", float(i), ts + i, s) for i, s in enumerate(steps)],
        )
        gone = client.create_run(other, run_name="gone")
        client.log_metric(gone.info.run_id, "x", 1.0)
        client.delete_run(gone.info.run_id)
        return uri, [full.info.run_id, proxy.info.run_id, gone.info.run_id]


def test_reads_nan_and_infinities_from_their_sql_encoding(sql_store: tuple[str, list[str]]) -> None:
    uri, ids = sql_store
    assert mlflow_sql.can_read(uri) and mlflow_sql.can_read(Path(uri[len("sqlite:///") :]))
    runs = mlflow_sql.read(uri, ReadContext())
    assert [r.name for r in runs] == ["full", "proxy"]  # the deleted run is left out
    steps, values = runs[0].series("pg_loss")
    assert steps.tolist() == list(range(6))
    assert values[0] == 0.5 and math.isnan(values[1])
    assert values[2] == math.inf and values[3] == -math.inf
    assert values[4] == 1.7976931348623157e307 and values[5] == -2.25
    assert runs[0].attrs["experts_kept"] == 64 and runs[0].attrs["role"] == "full"
    assert runs[0].attrs["mlflow_tracking_uri"] == uri and runs[0].attrs["mlflow_run_id"] == ids[0]


def test_equals_get_metric_history(sql_store: tuple[str, list[str]]) -> None:
    """Oracle: the direct SQL read gives MlflowClient's values (after inf decoding)."""
    from mlflow import MlflowClient

    uri, ids = sql_store
    history = MlflowClient(uri).get_metric_history(ids[0], "actor/pg_loss")
    ref = np.array([m.value for m in history])
    ref[np.abs(ref) == 1.7976931348623157e308] *= math.inf
    got = mlflow_sql.read(uri, ReadContext(options={"run_ids": [ids[0]]}))[0].series("pg_loss")[1]
    np.testing.assert_array_equal(got, ref)


def test_restart_keeps_the_later_segment(sql_store: tuple[str, list[str]]) -> None:
    uri, ids = sql_store
    proxy = mlflow_sql.read(uri, ReadContext(options={"run_ids": [ids[1]]}))[0]
    steps, values = proxy.series("grad_norm")
    assert steps.tolist() == [0, 1, 2, 3, 4] and values.tolist() == [0.0, 1.0, 4.0, 5.0, 6.0]
    assert [e.kind for e in proxy.events] == ["restart"]
    assert proxy.attrs["seed"] == 3


def test_selection_by_experiment_and_ids(sql_store: tuple[str, list[str]]) -> None:
    uri, ids = sql_store
    assert mlflow_sql.read(uri, ReadContext(options={"experiment": "other"})) == []
    assert mlflow_sql.read(uri, ReadContext(options={"run_ids": [ids[2]]}))[0].name == "gone"
    with pytest.raises(IngestError, match="no MLflow run 'feed'"):
        mlflow_sql.read(uri, ReadContext(options={"run_ids": ["feed"]}))


def test_runs_uri_and_search_route_to_direct_sql(
    sql_store: tuple[str, list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    uri, ids = sql_store
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    run = mlflow_uri.read(f"runs:/{ids[1]}", ReadContext())[0]
    assert run.attrs["format"] == "mlflow_sql" and run.name == "proxy"
    found = mlflow_uri.search("sweep", "tags.role = 'proxy'")
    assert [r.name for r in found] == ["proxy"]
    with pytest.raises(MlflowError, match="no MLflow experiment 'nope'"):
        mlflow_uri.search("nope")


def test_other_sqlite_files_are_not_mlflow(tmp_path: Path) -> None:
    db = tmp_path / "app.db"
    with sqlite3.connect(db) as con:
        con.execute("CREATE TABLE metrics (x)")
    assert not mlflow_sql.can_read(db)
    with pytest.raises(IngestError, match="not an MLflow store"):
        mlflow_sql.read(db, ReadContext())
    (tmp_path / "junk.db").write_bytes(b"not sqlite")
    assert not mlflow_sql.can_read(tmp_path / "junk.db")


def test_no_tracking_uri_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    with pytest.raises(MlflowError, match="set MLFLOW_TRACKING_URI"):
        mlflow_uri.read("runs:/0123", ReadContext())


def test_cli_tracking_uri_reads_runs_uris_too(
    sql_store: tuple[str, list[str]],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    import json

    from proxydiag.cli import main

    uri, ids = sql_store
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "")  # restored after the test
    with pytest.raises(SystemExit) as exit_info:
        main(["diagnose", f"runs:/{ids[0]}", "--tracking-uri", uri, "--format", "json"])
    captured = capsys.readouterr()
    assert exit_info.value.code == 0, captured.err
    assert json.loads(captured.out.splitlines()[0])["run"] == f"full-{ids[0][:8]}"
