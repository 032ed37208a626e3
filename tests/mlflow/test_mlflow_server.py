"""Against a real MLflow tracking server: read runs back, write results back, check both ways."""

from __future__ import annotations

import json
import math
import time
import urllib.request
from typing import Any

import numpy as np
import polars as pl
import pytest
from mlflow_fixtures import MlflowServer, free_port

from proxydiag.diagnose.result import Diagnosis, RootCause
from proxydiag.errors import MlflowError
from proxydiag.fidelity.result import Comparison, FaultComparison, MetricFidelity
from proxydiag.frame import raw
from proxydiag.ingest import ReadContext
from proxydiag.ingest.mlflow import uri as mlflow_uri
from proxydiag.mlflow.sink import log_comparison, log_diagnosis
from proxydiag.mlflow.sync import sync
from proxydiag.run import Run
from proxydiag.run.build import build_run

pytestmark = pytest.mark.server
N_STEPS = 120
SPECIAL = {7: float("nan"), 8: float("inf"), 9: float("-inf")}


@pytest.fixture(scope="module")
def logged(mlflow_server: MlflowServer) -> dict[str, str]:
    """A full run and two proxies, logged to the server by MlflowClient."""
    from mlflow import MlflowClient
    from mlflow.entities import Metric, Param

    client = MlflowClient(mlflow_server.uri)
    exp = client.create_experiment("moe-sweep")
    ids = {}
    ts = int(time.time() * 1000)
    for name, role, kept in (
        ("full", "full", 64),
        ("proxy-32", "proxy", 32),
        ("proxy-8", "proxy", 8),
    ):
        run = client.create_run(exp, run_name=name, tags={"role": role, "group": "g1"})
        loss = [SPECIAL.get(s, 2.0 - s / N_STEPS) for s in range(N_STEPS)]
        metrics = [Metric("actor/pg_loss", v, ts + s, s) for s, v in enumerate(loss)]
        metrics += [Metric("actor/grad_norm", 1.0 + s % 5, ts + s, s) for s in range(N_STEPS)]
        client.log_batch(
            run.info.run_id, metrics=metrics[:1000], params=[Param("experts_kept", str(kept))]
        )
        ids[name] = run.info.run_id
    return ids


def test_runs_uri_reads_complete_paginated_history(
    mlflow_server: MlflowServer, logged: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from proxydiag.ingest.mlflow import rest as mlflow_rest

    monkeypatch.setattr(mlflow_rest, "BULK_MAX", 20)  # the bulk reply may be cut: page instead
    ctx = ReadContext(options={"tracking_uri": mlflow_server.uri, "page_size": 25})
    run = mlflow_uri.read(f"runs:/{logged['full']}", ctx)[0]
    steps, values = run.series("pg_loss")
    assert steps.tolist() == list(range(N_STEPS))  # 5 pages of 25, nothing sampled
    assert math.isnan(values[7]) and values[8] == math.inf and values[9] == -math.inf
    assert values[0] == 2.0 and values[-1] == pytest.approx(2.0 - 119 / 120)
    assert run.series("grad_norm")[1][:6].tolist() == [1.0, 2.0, 3.0, 4.0, 5.0, 1.0]
    assert run.attrs["role"] == "full" and run.attrs["experts_kept"] == 64
    assert run.attrs["mlflow_tracking_uri"] == mlflow_server.uri
    page = f"{mlflow_server.uri}/#/experiments/1/runs/{logged['full']}"
    assert mlflow_uri.read(page, ReadContext())[0].id == run.id


def test_bulk_and_paged_histories_agree(
    mlflow_server: MlflowServer, logged: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """One bulk reply per key, or get-history page by page: the same frame, NaN/±inf kept."""
    from polars.testing import assert_frame_equal

    from proxydiag.ingest.mlflow import rest as mlflow_rest

    calls: list[str] = []
    real = mlflow_rest.get_json

    def spy(uri: str, endpoint: str, params: dict[str, Any], **kw: Any) -> dict[str, Any]:
        calls.append(endpoint)
        return real(uri, endpoint, params, **kw)

    monkeypatch.setattr(mlflow_rest, "get_json", spy)
    bulk = mlflow_uri.read_mlflow_runs(mlflow_server.uri, [logged["full"]])[0].frame
    assert calls.count("metrics/get-history-bulk") == 2 and "metrics/get-history" not in calls
    calls.clear()
    monkeypatch.setattr(mlflow_rest, "AJAX", "/no-such-api/2.0/mlflow")  # e.g. a proxy: 404
    fallback = mlflow_uri.read_mlflow_runs(mlflow_server.uri, [logged["full"]])[0].frame
    assert calls.count("metrics/get-history") == 2
    monkeypatch.setattr(mlflow_rest, "BULK_MAX", 1)  # a reply that may be cut: paged at once
    paged = mlflow_uri.read_mlflow_runs(mlflow_server.uri, [logged["full"]])[0].frame
    for other in (fallback, paged):
        assert_frame_equal(bulk, other, check_exact=True)
    assert bulk.filter(pl.col("value").is_nan()).height == 1


def test_server_sqlite_and_rest_agree(mlflow_server: MlflowServer, logged: dict[str, str]) -> None:
    rest = mlflow_uri.read_mlflow_runs(mlflow_server.uri, [logged["proxy-8"]])[0]
    direct = mlflow_uri.read_mlflow_runs(f"sqlite:///{mlflow_server.db}", [logged["proxy-8"]])[0]
    assert rest.id == direct.id
    np.testing.assert_array_equal(rest.frame["value"].to_numpy(), direct.frame["value"].to_numpy())


def test_search_selects_by_filter(mlflow_server: MlflowServer, logged: dict[str, str]) -> None:
    runs = mlflow_uri.search("moe-sweep", "tags.role = 'proxy'", mlflow_server.uri)
    assert sorted(r.name for r in runs) == ["proxy-32", "proxy-8"]
    assert sorted(r.attrs["experts_kept"] for r in runs) == [8, 32]


def _diagnosis(run: Run, label: str, onset: int | None) -> Diagnosis:
    return Diagnosis(
        source=str(run.attrs["source"]),
        run=run.id,
        label=label,
        onset_step=onset,
        confidence=0.9,
        root_cause=RootCause(label, "grad_norm", onset),
    )


def _comparison(proxy: Run, full: Run, fidelity: float) -> Comparison:
    metric = MetricFidelity("grad_norm", fidelity - 0.1, (0.5, 0.9), 0.8, "faithful", {})
    faults = FaultComparison(
        {"label": "healthy", "onset_step": None},
        {"label": "healthy", "onset_step": None},
        None,
        None,
        True,
    )
    return Comparison(
        fidelity,
        "faithful",
        "step",
        {"grad_norm": metric},
        faults,
        full_runs=(full.id,),
        proxy_run=proxy.id,
    )


def _get(url: str) -> tuple[int, bytes]:
    with urllib.request.urlopen(url, timeout=10) as resp:
        return int(resp.status), resp.read()


def test_write_back_and_rerun_updates_in_place(
    mlflow_server: MlflowServer, logged: dict[str, str]
) -> None:
    from mlflow import MlflowClient

    ctx = ReadContext(options={"tracking_uri": mlflow_server.uri})
    full = mlflow_uri.read(f"runs:/{logged['full']}", ctx)[0]
    proxy = mlflow_uri.read(f"runs:/{logged['proxy-32']}", ctx)[0]
    html = "<html><body><h1>proxydiag report</h1></body></html>"
    first = log_diagnosis(_diagnosis(proxy, "gradient_overflow", 40), proxy, report_html=html)
    assert first == logged["proxy-32"]
    log_comparison(_comparison(proxy, full, 0.6), proxy, full, report_html=html)
    again = log_comparison(_comparison(proxy, full, 0.75), proxy, [full], report_html=html)
    log_diagnosis(_diagnosis(proxy, "healthy", None), proxy)
    assert again == first
    client = MlflowClient(mlflow_server.uri)
    data = client.get_run(first).data
    assert data.tags["proxydiag.label"] == "healthy" and data.tags["proxydiag.onset_step"] == "none"
    assert data.tags["proxydiag.verdict"] == "faithful"
    assert data.tags["proxydiag.full_run"] == logged["full"]
    assert data.metrics["proxydiag.fidelity"] == 0.75  # the latest value is what the UI shows
    assert data.metrics["proxydiag.fidelity.grad_norm"] == pytest.approx(0.65)
    history = client.get_metric_history(first, "proxydiag.fidelity")
    assert sorted(m.value for m in history) == [0.6, 0.75] and {m.step for m in history} == {0}
    # through the server's REST API: the artifacts are listed and the HTML is served
    status, body = _get(
        f"{mlflow_server.uri}/api/2.0/mlflow/artifacts/list?run_id={first}&path=proxydiag"
    )
    names = sorted(f["path"] for f in json.loads(body)["files"])
    assert status == 200 and names == [
        "proxydiag/comparison.json",
        "proxydiag/diagnosis.json",
        "proxydiag/report.html",
        "proxydiag/result.json",
    ]
    status, page = _get(
        f"{mlflow_server.uri}/get-artifact?path=proxydiag/report.html&run_uuid={first}"
    )
    assert status == 200 and page.decode() == html
    _, result = _get(
        f"{mlflow_server.uri}/get-artifact?path=proxydiag/diagnosis.json&run_uuid={first}"
    )
    assert json.loads(result)["label"] == "healthy"


def test_a_run_from_files_gets_its_own_mlflow_run_once(mlflow_server: MlflowServer) -> None:
    from mlflow import MlflowClient

    run = build_run(
        raw([0, 1, 2], ["loss"] * 3, [1.0, 0.5, float("nan")]),
        name="tb-proxy",
        source="/data/tb/proxy",
        fmt="tensorboard",
        attrs={"experts_kept": 16},
    )
    first = log_diagnosis(
        _diagnosis(run, "loss_divergence", 2),
        run,
        tracking_uri=mlflow_server.uri,
        experiment="from-files",
    )
    second = log_diagnosis(
        _diagnosis(run, "loss_divergence", 1),
        run,
        tracking_uri=mlflow_server.uri,
        experiment="from-files",
    )
    assert first == second
    got = MlflowClient(mlflow_server.uri).get_run(first)
    assert got.data.tags["proxydiag.source"] == "/data/tb/proxy"
    assert got.data.tags["proxydiag.onset_step"] == "1" and got.data.params["experts_kept"] == "16"


class MemoryStore:
    """The store's result interface, in memory (the sink's contract with RunStore)."""

    def __init__(self, runs: list[Run]) -> None:
        self.runs = {r.id: r for r in runs}
        self.results: dict[tuple[str, str], dict[str, Any]] = {}
        self.outbox = self  # the outbox's interface, on the same object

    def outbox_for(self, sink: str) -> MemoryStore:
        assert sink == "mlflow"
        return self

    def get(self, run_id: str) -> Run:
        return self.runs[run_id]

    def put(self, run: Run) -> str:
        self.runs[run.id] = run
        return run.id

    def put_diagnosis(self, d: Diagnosis) -> None:
        self.results[("diagnosis", d.run)] = {"result": d.to_dict(), "synced": False}

    def put_comparison(self, c: Comparison) -> str:
        key = f"{c.proxy_run}<-{','.join(sorted(c.full_runs))}"
        self.results[("comparison", key)] = {"result": c.to_dict(), "synced": False}
        return key

    def pending(self) -> list[dict[str, Any]]:
        return [
            {"kind": k, "key": key, "result": v["result"]}
            for (k, key), v in self.results.items()
            if not v["synced"]
        ]

    def mark_synced(self, kind: str, key: str, *, result: dict[str, Any] | None = None) -> bool:
        self.results[(kind, key)]["synced"] = True
        return True

    def report(self, kind: str, key: str) -> str | None:
        return None


def test_server_down_keeps_results_pending_then_sync_pushes(
    mlflow_server: MlflowServer, logged: dict[str, str]
) -> None:
    ctx = ReadContext(options={"tracking_uri": mlflow_server.uri})
    proxy = mlflow_uri.read(f"runs:/{logged['proxy-8']}", ctx)[0]
    store = MemoryStore([proxy])
    down = f"http://127.0.0.1:{free_port()}"
    t0 = time.monotonic()
    with pytest.raises(MlflowError, match=r"^MLflow server http://127.0.0.1:\d+ is not answering"):
        log_diagnosis(
            _diagnosis(proxy, "precision_fault", 30), proxy, tracking_uri=down, store=store
        )  # type: ignore[arg-type]
    assert time.monotonic() - t0 < 5
    assert [p["key"] for p in store.outbox.pending()] == [proxy.id]
    result = sync(store, tracking_uri=mlflow_server.uri)  # type: ignore[arg-type]
    assert result.pushed == (("diagnosis", proxy.id, logged["proxy-8"]),) and not result.failed
    assert store.outbox.pending() == []


def _cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    from proxydiag.cli import main

    with pytest.raises(SystemExit) as exit_info:
        main(args)
    captured = capsys.readouterr()
    return int(exit_info.value.code or 0), captured.out, captured.err


def test_cli_server_down_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    down = f"http://127.0.0.1:{free_port()}"
    code, stdout, stderr = _cli(
        [
            "mlflow",
            "runs",
            "--mlflow-experiment",
            "x",
            "--tracking-uri",
            down.replace("http://", "http://bob:hunter2@"),
        ],
        capsys,
    )
    assert code == 2
    assert stderr.strip().splitlines() == [
        f"error: MLflow server {down.replace('http://', 'http://***@')} is not answering "
        "(connection refused); start it, or check MLFLOW_TRACKING_URI"
    ]
    assert "hunter2" not in stdout + stderr


def test_cli_lists_runs_with_their_results(
    mlflow_server: MlflowServer, logged: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    code, stdout, stderr = _cli(
        [
            "mlflow",
            "runs",
            "--mlflow-experiment",
            "moe-sweep",
            "--filter",
            "params.experts_kept = '8'",
            "--tracking-uri",
            mlflow_server.uri,
        ],
        capsys,
    )
    assert code == 0, stderr
    # only newlines stripped: a run no test has labelled yet ends in empty tab-separated cells
    lines = stdout.rstrip("\n").splitlines()
    assert len(lines) == 2 and lines[1].startswith(f"{logged['proxy-8']}\tproxy-8\tproxy\t8\t")


def test_real_store_keeps_comparison_until_cli_sync(
    mlflow_server: MlflowServer,
    logged: dict[str, str],
    tmp_path: Any,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from mlflow import MlflowClient

    from proxydiag.store import RunStore

    ctx = ReadContext(options={"tracking_uri": mlflow_server.uri})
    full = mlflow_uri.read(f"runs:/{logged['full']}", ctx)[0]
    proxy = mlflow_uri.read(f"runs:/{logged['proxy-8']}", ctx)[0]
    store = RunStore(tmp_path / "store")
    store.put(full)
    store.put(proxy)
    down = f"http://127.0.0.1:{free_port()}"
    html = "<html><body><h1>kept while MLflow was down</h1></body></html>"
    with pytest.raises(MlflowError, match="is not answering"):
        log_comparison(
            _comparison(proxy, full, 0.42),
            proxy,
            full,
            tracking_uri=down,
            store=store,
            report_html=html,
        )
    assert store.comparisons()["mlflow_synced"].to_list() == [False]
    kept = list((tmp_path / "store" / "pending_reports").iterdir())
    assert len(kept) == 1 and store.outbox.report("comparison", f"{proxy.id}<-{full.id}") == html
    code, stdout, stderr = _cli(
        ["mlflow", "sync", "--store", str(tmp_path / "store"), "--tracking-uri", mlflow_server.uri],
        capsys,
    )
    assert code == 0, stderr
    assert stdout.startswith(
        f"synced comparison {proxy.id}<-{full.id} -> MLflow run {logged['proxy-8']}"
    )
    assert store.comparisons()["mlflow_synced"].to_list() == [True]
    data = MlflowClient(mlflow_server.uri).get_run(logged["proxy-8"]).data
    assert data.metrics["proxydiag.fidelity"] == 0.42
    assert data.tags["proxydiag.full_run"] == logged["full"]
    status, page = _get(
        f"{mlflow_server.uri}/get-artifact?path=proxydiag/report.html&run_uuid={logged['proxy-8']}"
    )  # the report kept in the store
    assert status == 200 and page.decode() == html
    assert not kept[0].exists()  # synced: the kept copy is gone


def test_cli_ingest_selects_an_experiment_by_filter(
    mlflow_server: MlflowServer,
    logged: dict[str, str],
    tmp_path: Any,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from proxydiag.store import RunStore

    code, _, stderr = _cli(
        [
            "ingest",
            "--mlflow-experiment",
            "moe-sweep",
            "--filter",
            "tags.role = 'proxy'",
            "--tracking-uri",
            mlflow_server.uri,
            "--store",
            str(tmp_path / "s"),
        ],
        capsys,
    )
    assert code == 0, stderr
    runs = RunStore(tmp_path / "s").runs().sort("experts_kept")
    assert runs["name"].to_list() == ["proxy-8", "proxy-32"]
    assert runs["role"].to_list() == ["proxy", "proxy"] and runs["n_points"].to_list() == [240, 240]


def test_a_server_answering_html_is_one_error_line(tmp_path: Any) -> None:
    """A proxy's login page (HTTP 200, HTML) is no MLflow reply: one MlflowError, no JSON
    traceback; the bulk endpoint answering so falls back to get-history, which says it."""
    import http.server
    import threading

    class Page(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = b"<html><body>please log in</body></html>"
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Page)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        from proxydiag.ingest.mlflow import rest as mlflow_rest

        uri = f"http://127.0.0.1:{server.server_address[1]}"
        with pytest.raises(MlflowError, match="did not answer with a JSON object"):
            mlflow_rest.get_json(uri, "runs/get", {"run_id": "x"})
        with pytest.raises(MlflowError, match="metrics/get-history did not answer"):
            mlflow_rest.histories(
                uri, [{"info": {"run_id": "r"}, "data": {"metrics": [{"key": "loss", "step": 3}]}}]
            )
    finally:
        server.shutdown()
        server.server_close()  # shutdown stops serving; the listening socket closes here


def test_a_pending_result_keeps_its_run_so_sync_can_push_it(
    mlflow_server: MlflowServer,
    logged: dict[str, str],
    tmp_path: Any,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``diagnose FILE --store S --log-to-mlflow`` with the server down: the store had no run,
    so the result could never be synced; the sink keeps the run with it."""
    from proxydiag.store import RunStore

    ctx = ReadContext(options={"tracking_uri": mlflow_server.uri})
    proxy = mlflow_uri.read(f"runs:/{logged['proxy-32']}", ctx)[0]
    store = RunStore(tmp_path / "fresh")
    with pytest.raises(MlflowError, match="is not answering"):
        log_diagnosis(
            _diagnosis(proxy, "precision_fault", 30),
            proxy,
            tracking_uri=f"http://127.0.0.1:{free_port()}",
            store=store,
        )
    assert store.runs()["run"].to_list() == [proxy.id]
    code, stdout, stderr = _cli(
        ["mlflow", "sync", "--store", str(tmp_path / "fresh"), "--tracking-uri", mlflow_server.uri],
        capsys,
    )
    assert code == 0 and stdout.startswith(f"synced diagnosis {proxy.id}"), stderr
