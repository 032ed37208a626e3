"""An MLflow experiment ingested as a fleet from a real tracking server: resumable (ended,
unchanged runs are not read again; a run still logging always is), complete histories past the
server's 25,000-point replies on worker processes, and a bounded number of REST requests."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from mlflow_fixtures import MlflowServer

from proxydiag.ingest.mlflow import rest as mlflow_rest
from proxydiag.store import RunStore

pytestmark = pytest.mark.server
N_RUNS = 30
N_STEPS = 40
KEYS = ("actor/pg_loss", "actor/grad_norm", "critic/vf_loss")
#: the runs "stored before the interruption"
FIRST = 12


def _cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    from proxydiag.cli import main

    with pytest.raises(SystemExit) as exit_info:
        main(args)
    captured = capsys.readouterr()
    return int(exit_info.value.code or 0), captured.out, captured.err


def _ingest(
    server: MlflowServer,
    experiment: str,
    store: Path,
    capsys: pytest.CaptureFixture[str],
    *extra: str,
) -> tuple[int, str, str]:
    return _cli(
        [
            "ingest",
            "--mlflow-experiment",
            experiment,
            "--tracking-uri",
            server.uri,
            "--store",
            str(store),
            *extra,
        ],
        capsys,
    )


def _state(store: Path) -> dict[str, object]:
    """Run ids with their frames, and catalog rows without ingest times."""
    runs = RunStore(store)
    table = runs.runs().drop("ingested_at").sort("run")
    frames = {
        rid: runs.get(rid).frame.sort("metric", "step").to_dicts() for rid in table["run"].to_list()
    }
    return {"catalog": table.to_dicts(), "frames": json.dumps(frames, default=str)}


@pytest.fixture(scope="module")
def sweep(mlflow_server: MlflowServer) -> dict[str, Any]:
    """30 ended runs (the first 12 tagged ``part=first``) and one still running."""
    from mlflow import MlflowClient
    from mlflow.entities import Metric

    client = MlflowClient(mlflow_server.uri)
    exp = client.create_experiment("fleet-sweep")
    ts = int(time.time() * 1000)
    ended: list[str] = []
    for i in range(N_RUNS):
        part = "first" if i < FIRST else "rest"
        run = client.create_run(exp, run_name=f"proxy-{i:02d}", tags={"part": part})
        metrics = [
            Metric(key, (k + 1) * (1.0 + i / 10) - s / N_STEPS, ts + s, s)
            for k, key in enumerate(KEYS)
            for s in range(N_STEPS)
        ]
        client.log_batch(run.info.run_id, metrics=metrics)
        client.set_terminated(run.info.run_id)
        ended.append(run.info.run_id)
    live = client.create_run(exp, run_name="live", tags={"part": "live"})
    client.log_batch(
        live.info.run_id, metrics=[Metric(KEYS[0], 1.0 - s / 100, ts + s, s) for s in range(10)]
    )
    return {"ended": ended, "live": live.info.run_id, "client": client}


def _count_reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Run ids the REST reader fetched (``runs/get``), in this process (``--workers 1``)."""
    read: list[str] = []
    real = mlflow_rest.get_run

    def spy(uri: str, run_id: str) -> dict[str, Any]:
        read.append(run_id)
        return real(uri, run_id)

    monkeypatch.setattr(mlflow_rest, "get_run", spy)
    return read


def test_a_rerun_after_an_interruption_reads_only_what_is_missing(
    mlflow_server: MlflowServer,
    sweep: dict[str, Any],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    read = _count_reads(monkeypatch)
    whole = tmp_path / "whole"
    code, _, err = _ingest(mlflow_server, "fleet-sweep", whole, capsys)
    assert code == 0, err
    assert len(read) == N_RUNS + 1

    # interrupted: only the first runs were stored; the re-run reads the rest and the live one
    resumed = tmp_path / "resumed"
    code, _, err = _ingest(
        mlflow_server, "fleet-sweep", resumed, capsys, "--filter", "tags.part = 'first'"
    )
    assert code == 0, err
    read.clear()
    code, _, err = _ingest(mlflow_server, "fleet-sweep", resumed, capsys)
    assert code == 0, err
    assert sorted(read) == sorted([*sweep["ended"][FIRST:], sweep["live"]])
    assert f"{FIRST} source(s) unchanged" in err
    assert _state(resumed) == _state(whole)

    # nothing changed: only the run still logging is read again
    read.clear()
    code, _, err = _ingest(mlflow_server, "fleet-sweep", resumed, capsys)
    assert code == 0, err
    assert read == [sweep["live"]] and f"{N_RUNS} source(s) unchanged" in err

    # an ended run logged to again, and --force, are read again
    from mlflow.entities import Metric

    client = sweep["client"]
    changed = sweep["ended"][3]
    client.log_batch(changed, metrics=[Metric(KEYS[0], 0.5, int(time.time() * 1000), N_STEPS)])
    read.clear()
    code, _, err = _ingest(mlflow_server, "fleet-sweep", resumed, capsys)
    assert code == 0, err
    assert sorted(read) == sorted([changed, sweep["live"]])
    stored = RunStore(resumed).runs().filter(source=f"runs:/{changed}")
    assert stored["n_points"].to_list() == [len(KEYS) * N_STEPS + 1]
    read.clear()
    code, _, err = _ingest(mlflow_server, "fleet-sweep", resumed, capsys, "--force")
    assert code == 0, err
    assert len(read) == N_RUNS + 1


def test_a_history_past_the_servers_reply_cap_is_read_whole_on_a_worker(
    mlflow_server: MlflowServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """25,100 points on 12,550 steps: the bulk reply stops at 25,000 points, so the worker
    pages the history instead; every step keeps its last point."""
    from mlflow import MlflowClient
    from mlflow.entities import Metric

    n = mlflow_rest.BULK_MAX + 100
    client = MlflowClient(mlflow_server.uri)
    exp = client.create_experiment("fleet-long")
    ts = int(time.time() * 1000)
    rid = client.create_run(exp, run_name="long").info.run_id
    points = [Metric("actor/grad_norm", float(s), ts + s, s // 2) for s in range(n)]
    for start in range(0, n, 1000):
        client.log_batch(rid, metrics=points[start : start + 1000])
    client.set_terminated(rid)
    code, _, err = _ingest(mlflow_server, "fleet-long", tmp_path / "s", capsys, "--workers", "2")
    assert code == 0, err
    store = RunStore(tmp_path / "s")
    run = store.get(store.runs().filter(source=f"runs:/{rid}")["run"].item())
    steps, values = run.series("grad_norm")
    assert steps.tolist() == list(range(n // 2))
    assert values.tolist() == [float(2 * k + 1) for k in range(n // 2)]  # the last of each step


def test_requests_per_worker_are_bounded(
    mlflow_server: MlflowServer,
    sweep: dict[str, Any],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The reader never has more requests in flight than its bound (option or environment)."""
    import threading

    from proxydiag.ingest import ReadContext
    from proxydiag.ingest.mlflow import uri as mlflow_uri

    lock = threading.Lock()
    now, peak = [0], [0]
    real = mlflow_rest.get_json

    def spy(uri: str, endpoint: str, params: dict[str, Any], **kw: Any) -> dict[str, Any]:
        with lock:
            now[0] += 1
            peak[0] = max(peak[0], now[0])
        try:
            time.sleep(0.02)  # long enough for every thread of the pool to be waiting
            return real(uri, endpoint, params, **kw)
        finally:
            with lock:
                now[0] -= 1

    monkeypatch.setattr(mlflow_rest, "get_json", spy)
    ids = sweep["ended"][:4]  # 12 histories
    mlflow_uri.read_mlflow_runs(mlflow_server.uri, ids, ctx=ReadContext())
    assert peak[0] == min(mlflow_rest.WORKERS, 12)
    peak[0] = 0
    monkeypatch.setenv(mlflow_rest.REQUESTS_ENV, "2")
    mlflow_uri.read_mlflow_runs(mlflow_server.uri, ids, ctx=ReadContext())
    assert peak[0] == 2
    peak[0] = 0
    mlflow_uri.read_mlflow_runs(mlflow_server.uri, ids, ctx=ReadContext(options={"requests": 3}))
    assert peak[0] == 3


def test_ctrl_c_midway_then_a_rerun_reads_only_the_runs_not_stored(
    mlflow_server: MlflowServer,
    sweep: dict[str, Any],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """SIGINT to a real ``proxydiag ingest`` once its first batch is stored; the re-run reads
    the runs the interrupted one did not store (and the live one), and ends where one
    uninterrupted ingest does."""
    import os
    import signal
    import subprocess
    import sys

    store = tmp_path / "s"
    args = ["--mlflow-experiment", "fleet-sweep", "--tracking-uri", mlflow_server.uri]
    # one request at a time (slower), a commit every 3 runs: the first batch is stored long
    # before the last run is read, so the interrupt lands midway
    env = {**os.environ, mlflow_rest.REQUESTS_ENV: "1", "PROXYDIAG_BATCH_RUNS": "3"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "proxydiag", "ingest", *args, "--store", str(store)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 60
    while proc.poll() is None and time.monotonic() < deadline:
        if (store / "catalog.duckdb").exists() and RunStore(store).runs().height:
            break
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=60)
    stored = set(RunStore(store).runs()["source"].to_list())
    ended = {f"runs:/{rid}" for rid in sweep["ended"]}
    if proc.returncode == 0 or stored >= ended:  # quicker than the poll: nothing to resume
        pytest.skip("the ingest stored every ended run before it could be interrupted")
    assert proc.returncode != 0 and b"Traceback" not in stderr, stderr
    assert 0 < len(stored & ended) < N_RUNS

    read = _count_reads(monkeypatch)
    code, _, err = _ingest(mlflow_server, "fleet-sweep", store, capsys)
    assert code == 0, err
    assert sorted(f"runs:/{rid}" for rid in read) == sorted(
        [*(ended - stored), f"runs:/{sweep['live']}"]
    )
    code, _, err = _ingest(mlflow_server, "fleet-sweep", tmp_path / "whole", capsys)
    assert code == 0, err
    assert _state(store) == _state(tmp_path / "whole")
