"""A real ``mlflow server`` for the test session (sqlite backend, local artifacts, 127.0.0.1).

Started once per session with :func:`proxydiag.testing.mlflow_server.start` (a free port, its own
process group, waited for until ``/health`` answers), stopped with its whole process group at
the end. Skips visibly when it cannot start. Telemetry is off, so nothing leaves the machine.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from proxydiag.errors import MlflowError
from proxydiag.testing.mlflow_server import MlflowServer, free_port, start

__all__ = ["QUIET_ENV", "MlflowServer", "free_port", "mlflow_server"]

START_TIMEOUT_S = 90.0

#: environment for every MLflow process and client in the tests: no telemetry, fast failures
QUIET_ENV = {
    "MLFLOW_DISABLE_TELEMETRY": "true",
    "DO_NOT_TRACK": "true",
    "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0",
    "MLFLOW_HTTP_REQUEST_TIMEOUT": "30",
}


@pytest.fixture(scope="session")
def mlflow_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MlflowServer]:
    """A running MLflow tracking server; the session stops it."""
    os.environ.update(QUIET_ENV)
    try:
        server = start(tmp_path_factory.mktemp("mlflow_server"), timeout_s=START_TIMEOUT_S)
    except MlflowError as exc:
        pytest.skip(str(exc))
    with server:
        yield server
