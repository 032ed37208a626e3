"""``--workers N``: N local worker processes that survive one another's death.

``concurrent.futures.ProcessPoolExecutor`` marks the whole pool broken when one worker dies
(every pending future fails with ``BrokenProcessPool``, and which item killed it is unknown).
Here each worker holds exactly one item at a time over its own pipe, so when a worker's process
ends without answering (killed by the OOM killer, a segfault in a native reader, ``kill -9``),
the item it held fails with that reason, a fresh worker takes its place, and every other item
goes on. Workers are *spawned* (polars and DuckDB threads do not survive ``fork``); their
stdout is sent to stderr so that nothing but the driver's results reaches stdout.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
import sys
import warnings
import weakref
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess
from typing import Any

from proxydiag.errors import ConfigError
from proxydiag.fleet.executor import Outcome, attempt, in_order

#: items outstanding per worker (enough to keep every worker busy while the driver writes)
WINDOW_PER_WORKER = 4


def attempt_quietly(fn: Callable[[Any], Any], item: Any) -> Outcome:
    """:func:`attempt`, with the warnings raised meanwhile carried back in the outcome."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        outcome = attempt(fn, item)
    said = tuple((w.category, str(w.message)) for w in caught)
    return replace(outcome, warnings=said) if said else outcome


def replay_warnings(outcome: Outcome) -> None:
    """Warn, in the driver, what the item's worker warned."""
    for category, message in outcome.warnings:
        warnings.warn(category(message) if isinstance(category, type) else message, stacklevel=2)


def _serve(conn: Connection) -> None:
    """A worker's loop: ``(index, fn, item)`` in, ``(index, outcome)`` out, ``None`` ends it."""
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())  # results travel by pipe, never stdout
    while True:
        task = conn.recv()
        if task is None:
            return
        index, fn, item = task
        conn.send((index, attempt_quietly(fn, item)))


@dataclass
class _Worker:
    process: BaseProcess
    conn: Connection
    task: tuple[int, Any] | None = None  # (index, item) it holds


class LocalPool:
    """``workers`` spawned processes, one item each at a time; they are started by the first
    :meth:`map` and serve the later ones (a worker's imports and compiled code are paid once
    per command) until :meth:`close` or the pool's end."""

    name = "local"

    def __init__(self, *, workers: int) -> None:
        if workers < 1:
            raise ConfigError(f"workers={workers}: give 1 or more worker processes")
        self.workers = workers
        self._ctx = mp.get_context("spawn")
        self._pool: list[_Worker] = []
        weakref.finalize(self, _shut_down, self._pool)

    def close(self) -> None:
        """End the worker processes (the next :meth:`map` starts new ones)."""
        _shut_down(self._pool)

    def map(self, fn: Callable[[Any], Any], items: Iterable[Any]) -> Iterator[Outcome]:
        pool = self._pool
        queue: list[tuple[int, Any]] = []

        def submit(index: int, item: Any) -> None:
            queue.append((index, item))
            self._dispatch(pool, queue, fn)

        def collect() -> tuple[int, Outcome]:
            index, outcome = self._collect(pool)
            self._dispatch(pool, queue, fn)
            return index, outcome

        try:
            for outcome in in_order(
                submit, collect, items, window=self.workers * WINDOW_PER_WORKER
            ):
                replay_warnings(outcome)
                yield outcome
        finally:  # a map left early: its items still running must not answer the next map
            _shut_down([w for w in pool if w.task is not None])
            pool[:] = [w for w in pool if w.task is None]

    def _dispatch(
        self, pool: list[_Worker], queue: list[tuple[int, Any]], fn: Callable[[Any], Any]
    ) -> None:
        while queue:
            idle = next((w for w in pool if w.task is None), None)
            if idle is None and len(pool) < self.workers:
                idle = self._start()
                pool.append(idle)
            if idle is None:
                return
            idle.task = queue.pop(0)
            try:
                idle.conn.send((idle.task[0], fn, idle.task[1]))
            except OSError:  # it died while idle: the item goes to another worker
                queue.insert(0, idle.task)
                pool.remove(idle)
                idle.process.join()

    def _start(self) -> _Worker:
        ours, theirs = self._ctx.Pipe()
        process = self._ctx.Process(target=_serve, args=(theirs,), daemon=True)
        process.start()
        theirs.close()
        return _Worker(process, ours)

    def _collect(self, pool: list[_Worker]) -> tuple[int, Outcome]:
        busy = [w for w in pool if w.task is not None]
        ready = wait([w.conn for w in busy] + [w.process.sentinel for w in busy])
        for worker in busy:
            assert worker.task is not None
            index, item = worker.task
            if worker.conn in ready or worker.conn.poll():
                try:
                    got: tuple[int, Outcome] = worker.conn.recv()
                except EOFError:  # died while answering
                    pass
                else:
                    worker.task = None
                    return got
            if worker.process.sentinel in ready:
                worker.process.join()
                pool.remove(worker)
                worker.conn.close()
                return index, Outcome(item, False, reason=_death(worker.process.exitcode))
        raise AssertionError("wait() returned without a ready worker")  # pragma: no cover


def _death(exitcode: int | None) -> str:
    """The reason an item failed when its worker process ended without answering.

    >>> _death(-9)
    'the worker process died (killed by signal 9) while working on this item'
    """
    how = f"killed by signal {-exitcode}" if exitcode and exitcode < 0 else f"exit code {exitcode}"
    return f"the worker process died ({how}) while working on this item"


def _shut_down(pool: list[_Worker]) -> None:
    """Ask every worker to end, and end those that do not (a busy one is terminated)."""
    for worker in pool:
        with contextlib.suppress(OSError):
            worker.conn.send(None)
    for worker in pool:
        worker.process.join(timeout=0 if worker.task is not None else 5)
        if worker.process.is_alive():
            worker.process.terminate()
            worker.process.join()
        worker.conn.close()
    pool.clear()
