"""Work that polars does on one core, split into parts run side by side (polars releases the
GIL while it works), on threads kept between reads: starting them costs 1-2 ms, a third of a
Parquet read of 10^6 points.
"""

from __future__ import annotations

import functools
import itertools
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

import polars as pl

_T = TypeVar("_T")


def parts(n: int, *, least: int = 1) -> list[tuple[int, int]]:
    """``(start, stop)`` of contiguous parts of ``n`` items, one per polars thread, each of
    ``least`` items or more (a single part when ``n`` is too small to split).

    >>> parts(5, least=2)[-1][1], len(parts(1))
    (5, 1)
    """
    count = max(1, min(pl.thread_pool_size(), n // max(least, 1)))
    bounds = [n * i // count for i in range(count + 1)]
    return list(itertools.pairwise(bounds))


def side_by_side(work: Callable[[int, int], _T], spans: Sequence[tuple[int, int]]) -> list[_T]:
    """``work(start, stop)`` of each span, in order; side by side when there are several."""
    if len(spans) < 2:
        return [work(a, b) for a, b in spans]
    return list(_pool(os.getpid(), len(spans)).map(work, *zip(*spans, strict=True)))


@functools.cache
def _pool(pid: int, workers: int) -> ThreadPoolExecutor:
    """The threads of a process (a forked child, another ``pid``, starts its own)."""
    return ThreadPoolExecutor(workers, thread_name_prefix="proxydiag")
