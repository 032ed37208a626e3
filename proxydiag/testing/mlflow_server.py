"""A throwaway MLflow tracking server for tests, benchmarks and scripts, and the wait for one.

``mlflow server`` takes seconds to import and bind; until then requests are refused.
:func:`start` runs one on 127.0.0.1 on a free port (sqlite backend, served artifacts, telemetry
off) in its own process group, and returns once ``/health`` answers (:func:`wait_healthy`).
:meth:`MlflowServer.stop` ends the whole group: the server forks workers (uvicorn/gunicorn)
that outlive a terminated parent and keep the port and the sqlite file open.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from proxydiag.errors import ConfigError, MlflowError

#: the server's environment on top of the caller's: nothing leaves the machine, no job runner
SERVER_ENV = {
    "MLFLOW_DISABLE_TELEMETRY": "true",
    "DO_NOT_TRACK": "true",
    "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false",  # no huey workers to start and stop
}
#: seconds a stopping server gets after SIGTERM before SIGKILL
_STOP_GRACE_S = 10.0


@dataclass(frozen=True)
class MlflowServer:
    """A running ``mlflow server``; :meth:`stop` ends it and every worker it forked."""

    uri: str  # http://127.0.0.1:<port>
    db: Path  # the sqlite backend file (readable directly, read-only)
    artifacts: Path  # where served artifacts land
    log: Path  # the server's stdout and stderr
    proc: subprocess.Popen[bytes]

    def __enter__(self) -> MlflowServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        """Stop the server's process group (SIGTERM, then SIGKILL after a grace period)."""
        # its own group (start_new_session below), whose id is the parent's pid: signalled
        # even when the parent is gone already, since its workers may outlive it
        if not _signal_group(self.proc.pid, signal.SIGTERM):
            self.proc.poll()
            return
        try:
            self.proc.wait(timeout=_STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            _signal_group(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=_STOP_GRACE_S)
        else:  # workers that have not exited with their parent
            time.sleep(0.2)
            _signal_group(self.proc.pid, signal.SIGKILL)


def _signal_group(pgid: int, sig: signal.Signals) -> bool:
    """Send ``sig`` to process group ``pgid``; False when no process is left in it."""
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        return False
    return True


def start(
    root: Path,
    *,
    db: Path | None = None,
    workers: int | None = 1,
    timeout_s: float = 120.0,
) -> MlflowServer:
    """Start ``mlflow server`` in ``root`` and return it once it answers; ``with start(...)
    as server:`` stops it however the block ends.

    ``db`` is the sqlite backend (default ``root/mlflow.db``); artifacts go to
    ``root/artifacts`` and the server's output to ``root/server.log``. ``workers=None`` keeps
    mlflow's default worker count. The server gets this process's environment without
    ``MLFLOW_TRACKING_*``, plus :data:`SERVER_ENV`. Raises :class:`MlflowError` with the log's
    tail when the server exits or does not answer within ``timeout_s`` seconds.
    """
    if timeout_s < 0 or (workers is not None and workers < 1):
        raise ConfigError(
            f"timeout_s must be >= 0 and workers >= 1 (or None), got {timeout_s} and {workers}"
        )
    root = root.resolve()  # the server runs in ``root``: relative paths would move
    root.mkdir(parents=True, exist_ok=True)
    db = db.resolve() if db is not None else root / "mlflow.db"
    port = free_port()
    uri = f"http://127.0.0.1:{port}"
    cmd = [
        sys.executable,
        "-m",
        "mlflow",
        "server",
        "--backend-store-uri",
        f"sqlite:///{db}",
        "--serve-artifacts",
        "--artifacts-destination",
        str(root / "artifacts"),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
    ]
    if workers is not None:
        cmd += ["--workers", str(workers)]
    environ = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_TRACKING")}
    log = root / "server.log"
    with log.open("wb") as out:  # the child keeps its own handle
        proc = subprocess.Popen(
            cmd,
            cwd=root,
            env=environ | SERVER_ENV,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    server = MlflowServer(uri, db, root / "artifacts", log, proc)
    try:
        healthy = wait_healthy(uri, timeout_s=timeout_s, proc=proc)
    except BaseException:  # Ctrl-C while waiting: no server left behind
        server.stop()
        raise
    if not healthy:
        server.stop()
        tail = " ".join(log.read_text(errors="replace")[-500:].split())
        raise MlflowError(
            f"{uri}: mlflow server did not answer within {timeout_s:g} s "
            f"(exit code {proc.poll()}); {log} ends: {tail}"
        )
    return server


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_healthy(
    url: str,
    *,
    timeout_s: float,
    proc: subprocess.Popen[Any] | None = None,
    poll_s: float = 0.25,
) -> bool:
    """Whether ``{url}/health`` answered 200 within ``timeout_s`` seconds.

    Gives up early (False) when ``proc``, the server's process, has exited.

    >>> wait_healthy("http://127.0.0.1:9", timeout_s=0.0)  # nothing listens on port 9
    False
    """
    deadline = time.monotonic() + timeout_s
    while not _answers(f"{url.rstrip('/')}/health"):
        if (proc is not None and proc.poll() is not None) or time.monotonic() >= deadline:
            return False
        time.sleep(poll_s)
    return True


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=1.0) as resp:
            return bool(resp.status == 200)
    except OSError:
        return False
