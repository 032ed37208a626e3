"""A real ``mlflow server`` for the test session (sqlite backend, local artifacts, 127.0.0.1).

Started once per session on a free port, waited for until ``/health`` answers, stopped (with
its whole process group) at the end. Skips visibly when it cannot start. Telemetry is off,
so nothing leaves the machine.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from proxydiag.mlflow_server import wait_healthy

START_TIMEOUT_S = 90.0

#: environment for every MLflow process and client in the tests: no telemetry, fast failures
QUIET_ENV = {
    "MLFLOW_DISABLE_TELEMETRY": "true",
    "DO_NOT_TRACK": "true",
    "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0",
    "MLFLOW_HTTP_REQUEST_TIMEOUT": "30",
}


@dataclass(frozen=True)
class MlflowServer:
    uri: str  # http://127.0.0.1:<port>
    db: Path  # the sqlite backend file (readable directly, read-only)
    artifacts: Path  # where served artifacts land


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="session")
def mlflow_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MlflowServer]:
    """A running MLflow tracking server; the session stops it."""
    os.environ.update(QUIET_ENV)
    root = tmp_path_factory.mktemp("mlflow_server")
    port = free_port()
    server = MlflowServer(f"http://127.0.0.1:{port}", root / "mlflow.db", root / "artifacts")
    cmd = [
        sys.executable, "-m", "mlflow", "server",
        "--backend-store-uri", f"sqlite:///{server.db}",
        "--serve-artifacts", "--artifacts-destination", str(server.artifacts),
        "--host", "127.0.0.1", "--port", str(port), "--workers", "1",
    ]
    env = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_TRACKING")}
    env["MLFLOW_SERVER_ENABLE_JOB_EXECUTION"] = "false"  # no job runner / huey workers to start
    log = (root / "server.log").open("wb")
    proc = subprocess.Popen(cmd, cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)
    try:
        if not wait_healthy(server.uri, timeout_s=START_TIMEOUT_S, proc=proc):
            tail = (root / "server.log").read_text(errors="replace")[-500:]
            pytest.skip(f"mlflow server did not start (rc={proc.poll()}): {tail}")
        yield server
    finally:
        _stop(proc)
        log.close()


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """Stop the server and the workers it spawned (its own process group, by id)."""
    if proc.poll() is not None:
        return
    pgid = os.getpgid(proc.pid)
    os.killpg(pgid, signal.SIGTERM)
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        os.killpg(pgid, signal.SIGKILL)
        proc.wait(timeout=10)
