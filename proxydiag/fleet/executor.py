"""Where fleet work items run: in this process, in local worker processes, or on Ray.

An executor maps one picklable function over items and yields one :class:`Outcome` per item,
**in the items' order** (so the output of ``--workers 8`` or ``--ray`` is line for line that of
``--workers 1``). At most ``window`` items are outstanding (running, or done and waiting for an
earlier one), so the driver's memory follows the window, not the fleet.

A failure is the item's alone: the function's exception becomes a one-line reason, and a worker
process that dies mid-task fails only the item it held (Ray first retries it elsewhere).

>>> from operator import neg
>>> [o.value for o in Serial().map(neg, [1, 2, 3])]
[-1, -2, -3]
>>> [o.value if o.ok else o.reason for o in Serial().map(int, ["7", "x"])]
[7, "ValueError: invalid literal for int() with base 10: 'x'"]
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from proxydiag.errors import ConfigError, ProxydiagError

T = TypeVar("T")


@dataclass(frozen=True)
class Outcome:
    """What one item gave: ``value`` when ``ok``, else the one-line ``reason`` it failed."""

    item: Any
    ok: bool
    value: Any = None
    reason: str = ""
    #: ``(category, message)`` of the warnings a worker process raised on this item
    warnings: tuple[tuple[Any, str], ...] = ()


class Executor(Protocol):
    """Runs ``fn`` on every item; outcomes come back in the items' order."""

    name: str

    def map(self, fn: Callable[[Any], Any], items: Iterable[Any]) -> Iterator[Outcome]: ...


def attempt(fn: Callable[[Any], Any], item: Any) -> Outcome:
    """``fn(item)`` as an Outcome: any exception is this item's failure, in one line.

    A :class:`ProxydiagError` already names the place; anything else is a bug met on this
    item, said with its type so that it is not mistaken for bad input.

    >>> attempt(int, "x").reason
    "ValueError: invalid literal for int() with base 10: 'x'"
    """
    try:
        return Outcome(item, True, fn(item))
    except ProxydiagError as exc:
        return Outcome(item, False, reason=one_line(str(exc)))
    except Exception as exc:  # one item's bug must not lose the other items' results
        return Outcome(item, False, reason=one_line(f"{type(exc).__name__}: {exc}"))


def one_line(text: str) -> str:
    """``text`` with its whitespace runs collapsed to single spaces."""
    return " ".join(text.split()) or "failed (no message)"


def failure_line(source: str, reason: str) -> str:
    """``source: reason`` in one line (the source said once when the reason already names it).

    >>> failure_line("/d/a.csv", "/d/a.csv:3: 'x' is not a number")
    "/d/a.csv:3: 'x' is not a number"
    >>> failure_line("/d/b", "the worker process died (killed by signal 9)")
    '/d/b: the worker process died (killed by signal 9)'
    """
    text = " ".join(reason.split())
    return text if source in text else f"{source}: {text}"


class Serial:
    """Every item in this process, one after the other (``--workers 1``: today's behaviour)."""

    name = "serial"

    def map(self, fn: Callable[[Any], Any], items: Iterable[Any]) -> Iterator[Outcome]:
        for item in items:
            yield attempt(fn, item)


def in_order(
    submit: Callable[[int, Any], None],
    collect: Callable[[], tuple[int, Outcome]],
    items: Iterable[Any],
    *,
    window: int,
) -> Iterator[Outcome]:
    """Drive an asynchronous pool: ``submit(index, item)`` while fewer than ``window`` items are
    outstanding, ``collect()`` one finished ``(index, outcome)``, and yield outcomes in order."""
    if window < 1:
        raise ConfigError(f"window={window}: an executor needs at least 1 outstanding item")
    pending = enumerate(items)
    done: dict[int, Outcome] = {}
    outstanding = 0
    next_out = 0
    for index, item in itertools.islice(pending, window):
        submit(index, item)
        outstanding += 1
    while outstanding:
        index, outcome = collect()
        done[index] = outcome
        while next_out in done:
            yield done.pop(next_out)
            next_out += 1
            outstanding -= 1
            for new_index, item in itertools.islice(pending, 1):
                submit(new_index, item)
                outstanding += 1
