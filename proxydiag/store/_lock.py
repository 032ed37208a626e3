"""The store's writer lock: one writing process at a time, and the others are told who it is.

``filelock`` holds an OS lock on ``<store>/.writer.lock`` (released by the kernel when the holder
dies, even by SIGKILL). The holder's PID, host and start time go into ``.writer.json`` beside
it, because ``filelock`` truncates the lock file on every attempt; a waiting process reads that
file to name the holder in :class:`~proxydiag.errors.StoreLockedError`.
"""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path
from types import TracebackType

from filelock import FileLock, Timeout

from proxydiag.errors import StoreLockedError

LOCK_NAME = ".writer.lock"
HOLDER_NAME = ".writer.json"


class WriterLock:
    """Re-entrant (per instance) writer lock of the store at ``root``.

    >>> import tempfile
    >>> root = Path(tempfile.mkdtemp())
    >>> lock = WriterLock(root, timeout_s=1.0)
    >>> with lock, lock:
    ...     lock.holder()["pid"] == os.getpid()
    True
    """

    def __init__(self, root: Path, *, timeout_s: float) -> None:
        if timeout_s < 0:
            raise ValueError(f"timeout_s must be >= 0, got {timeout_s}")
        self.root = root
        self.timeout_s = timeout_s
        self._lock = FileLock(root / LOCK_NAME, timeout=timeout_s)
        self._depth = 0

    @property
    def depth(self) -> int:
        """How many nested ``with`` blocks of this instance hold the lock (0: not held)."""
        return self._depth

    def holder(self) -> dict[str, object]:
        """What ``.writer.json`` says about the current (or last) holder; {} if nothing."""
        try:
            data = json.loads((self.root / HOLDER_NAME).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def __enter__(self) -> WriterLock:
        if self._depth == 0:
            self.root.mkdir(parents=True, exist_ok=True)
            try:
                self._lock.acquire()
            except Timeout:
                raise self._locked_error() from None
            self._write_holder()
        self._depth += 1
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._depth -= 1
        if self._depth == 0:
            (self.root / HOLDER_NAME).unlink(missing_ok=True)
            self._lock.release()

    def _write_holder(self) -> None:
        info = {"pid": os.getpid(), "host": socket.gethostname(), "since": time.time()}
        tmp = self.root / f".{HOLDER_NAME}.{os.getpid()}.tmp"
        tmp.write_text(json.dumps(info), encoding="utf-8")
        os.replace(tmp, self.root / HOLDER_NAME)

    def _locked_error(self) -> StoreLockedError:
        info = self.holder()
        who = (
            f"PID {info.get('pid')} on host {info.get('host')}"
            if info.get("pid")
            else "another process"
        )
        return StoreLockedError(
            f"store {self.root} is in use by {who}; retry or use another --store"
        )
