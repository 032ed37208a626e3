"""Tailing MLflow runs that are still logging: a real tracking server, and a file store."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

mlflow = pytest.importorskip("mlflow")

from mlflow import MlflowClient  # noqa: E402
from mlflow.entities import Metric  # noqa: E402

from proxydiag.ingest.tail import open_tail  # noqa: E402
from proxydiag.watch import Alert  # noqa: E402
from proxydiag.watch.live import tag_mlflow  # noqa: E402


def _log(client: MlflowClient, run_id: str, steps: range) -> None:
    metrics = [
        Metric(key, value, 0, step)
        for step in steps
        for key, value in (
            ("actor/grad_norm", 1.0 if step < 30 else math.inf),
            ("loss", 2.0 + step / 100),
        )
    ]
    client.log_batch(run_id, metrics=metrics)


def _collect(tail, rows):  # type: ignore[no-untyped-def]
    for step, metrics in tail.poll():
        rows.setdefault(step, {}).update(metrics)


def test_server_run_is_tailed_by_new_steps_only(mlflow_server, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("MLFLOW_TRACKING_URI", mlflow_server.uri)
    client = MlflowClient(mlflow_server.uri)
    exp = client.create_experiment("watch-tail")
    run = client.create_run(exp)
    run_id = run.info.run_id
    tail = open_tail(f"runs:/{run_id}")
    rows: dict[int, dict[str, float]] = {}
    _log(client, run_id, range(0, 20))
    _collect(tail, rows)
    assert sorted(rows) == list(range(20))
    _log(client, run_id, range(20, 40))
    first = tail.poll()
    assert [s for s, _ in first] == list(range(20, 40))  # only what was appended
    assert math.isinf(dict(first)[35]["actor/grad_norm"])
    assert not tail.ended  # type: ignore[attr-defined]
    client.set_terminated(run_id)
    assert tail.poll() == [] and tail.ended  # type: ignore[attr-defined]
    tag_mlflow(f"runs:/{run_id}", Alert("r", "n", "gradient_overflow", 30, 39, 0.9, "overflow"))
    tags = client.get_run(run_id).data.tags
    assert tags["proxydiag.label"] == "gradient_overflow" and tags["proxydiag.onset_step"] == "30"


def test_file_store_run_is_tailed_from_offsets(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # MLflow 3 keeps file stores on request
    store = tmp_path / "mlruns"
    client = MlflowClient(store.as_uri())
    exp = client.create_experiment("watch-files")
    run_id = client.create_run(exp).info.run_id
    folder = store / exp / run_id
    tail = open_tail(folder)
    rows: dict[int, dict[str, float]] = {}
    _log(client, run_id, range(0, 10))
    _collect(tail, rows)
    _log(client, run_id, range(10, 40))
    got = tail.poll()
    assert [s for s, _ in got] == list(range(10, 40))
    assert math.isinf(dict(got)[39]["actor/grad_norm"])
    client.set_terminated(run_id, status="FAILED")
    tail.poll()
    assert tail.ended  # type: ignore[attr-defined]
    tag_mlflow(str(folder), Alert("r", "n", "gradient_overflow", 30, 39, 0.9))
    assert client.get_run(run_id).data.tags["proxydiag.label"] == "gradient_overflow"
