"""``proxydiag.testing.mlflow_server.wait_healthy``: the one wait for a starting MLflow server."""

from __future__ import annotations

import subprocess
import sys
import time

from mlflow_fixtures import MlflowServer, free_port

from proxydiag.testing.mlflow_server import wait_healthy


def test_a_running_server_is_healthy(mlflow_server: MlflowServer) -> None:
    assert wait_healthy(mlflow_server.uri, timeout_s=5.0)
    assert wait_healthy(mlflow_server.uri + "/", timeout_s=5.0)


def test_an_exited_server_process_stops_the_wait_at_once() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"])
    proc.wait(timeout=30)
    start = time.monotonic()
    assert not wait_healthy(f"http://127.0.0.1:{free_port()}", timeout_s=60.0, proc=proc)
    assert time.monotonic() - start < 5.0


def test_nothing_listening_times_out() -> None:
    start = time.monotonic()
    assert not wait_healthy(f"http://127.0.0.1:{free_port()}", timeout_s=0.5, poll_s=0.1)
    assert 0.5 <= time.monotonic() - start < 5.0
