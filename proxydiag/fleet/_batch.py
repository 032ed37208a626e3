"""What the driver keeps before it commits: items gathered into batches bounded by count and
time, each batch one store transaction.

A driver killed between batches loses at most the batch it was gathering (whatever was
committed stays; a re-run does the rest, the content digests saying what is done).

>>> flushed = []
>>> batch = Batcher(flushed.append, Batching(runs=2, seconds=60))
>>> for x in range(5):
...     batch.add(x)
>>> batch.close()
>>> flushed
[[0, 1], [2, 3], [4]]
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from proxydiag.errors import ConfigError

#: the environment variable that sets how many runs a batch holds at most (default 256)
RUNS_ENV = "PROXYDIAG_BATCH_RUNS"


def _runs_from_env() -> int:
    text = os.environ.get(RUNS_ENV, "256")
    try:
        return int(text)
    except ValueError:
        raise ConfigError(f"{RUNS_ENV}={text!r}: give a whole number of runs") from None


@dataclass(frozen=True)
class Batching:
    """A batch is committed once it holds ``runs`` items (default: ``PROXYDIAG_BATCH_RUNS``,
    else 256) or its first item waited ``seconds`` (checked as items arrive), and at the end."""

    runs: int = field(default_factory=_runs_from_env)
    seconds: float = 2.0

    def __post_init__(self) -> None:
        if self.runs < 1 or self.seconds < 0:
            raise ConfigError(f"{self}: a batch holds 1 item or more, for 0 s or more")


class Batcher:
    """Gathers items and hands each full batch to ``flush`` (in the order they came)."""

    def __init__(self, flush: Callable[[list[Any]], None], policy: Batching) -> None:
        self._flush = flush
        self._policy = policy
        self._items: list[Any] = []
        self._since = 0.0

    def add(self, item: Any) -> None:
        if not self._items:
            self._since = time.monotonic()
        self._items.append(item)
        if (
            len(self._items) >= self._policy.runs
            or time.monotonic() - self._since >= self._policy.seconds
        ):
            self.flush()

    def flush(self) -> None:
        items, self._items = self._items, []
        if items:
            self._flush(items)

    def close(self) -> None:
        """Commit what is gathered (the end of the work)."""
        self.flush()
