"""Wait for an MLflow tracking server to come up (scripts, benchmarks and tests start one).

``mlflow server`` takes seconds to import and bind; until then requests are refused. Callers
start the process their own way and ask :func:`wait_healthy` whether it answered in time.
"""

from __future__ import annotations

import subprocess
import time
import urllib.request
from typing import Any


def wait_healthy(
    url: str, *, timeout_s: float, proc: subprocess.Popen[Any] | None = None,
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
