"""The decoder's tag table: each value's tag bytes -> a small integer id, in compiled code.

A run has tens to thousands of tags but up to millions of values. Each value's tag bytes
are hashed eight at a time into an open-addressing table (multiplicative hashing: the slot
comes from the hash's top bits) and compared with the first occurrence's bytes, so the scan
numbers tags as it goes, without a Python string per value. The table stays at most half
full; :func:`room` and :func:`grown` let the scan grow it between records.

``info`` holds one row per tag (columns :data:`OFF` ... :data:`HASH`): where its bytes lie
in the buffer, and the record, position in the ``Summary`` and kind of its *first* value
(a tag's first value decides whether it is a scalar, see
:mod:`~proxydiag.ingest.tensorboard._proto`), and its hash.
"""

from __future__ import annotations

import numpy as np

from proxydiag.ingest.tensorboard._jit import at, inlined, jit, read_u64

#: columns of ``info``
OFF, LEN, REC_START, REC_LEN, INDEX, KIND, HASH = range(7)
_MULT = 0x9E3779B97F4A7C15  # 2**64 / golden ratio


@inlined
def _hash(buf: np.ndarray, off: int, n: int) -> np.uint64:  # pragma: no cover
    h = np.uint64(n)
    if n >= 8:
        i = off
        while i + 8 < off + n:
            h = (h ^ read_u64(buf, i)) * np.uint64(_MULT)
            i += 8
        return np.uint64(
            (h ^ read_u64(buf, off + n - 8)) * np.uint64(_MULT)
        )  # last 8 bytes (may overlap)
    for i in range(off, off + n):
        h = (h ^ np.uint64(at(buf, i))) * np.uint64(_MULT)
    return h * np.uint64(_MULT)


@inlined
def _same(buf: np.ndarray, a: int, b: int, n: int) -> bool:  # pragma: no cover
    if n < 8:
        for i in range(n):  # noqa: SIM110 (numba: a plain loop, no generator)
            if at(buf, a + i) != at(buf, b + i):
                return False
        return True
    i = 0
    while i + 8 < n:
        if read_u64(buf, a + i) != read_u64(buf, b + i):
            return False
        i += 8
    return bool(read_u64(buf, a + n - 8) == read_u64(buf, b + n - 8))


@inlined
def _slot(h: np.uint64, size: int) -> int:  # pragma: no cover
    """The hash's top 32 bits scaled to ``[0, size)`` (the low bits of a product mix poorly)."""
    return int(np.int64(((h >> np.uint64(32)) * np.uint64(size)) >> np.uint64(32)))


@jit
def new_table() -> tuple[np.ndarray, np.ndarray]:  # pragma: no cover
    """An empty table: ``(slots, info)``; ``slots`` holds tag ids (-1: free)."""
    return np.full(256, -1, dtype=np.int64), np.empty((64, 7), dtype=np.int64)


@jit
def room(slots: np.ndarray, info: np.ndarray, n_tags: int) -> int:  # pragma: no cover
    """How many tags :func:`add` can take before the table must grow (it stays half empty)."""
    return int(min(info.shape[0], slots.size // 2)) - n_tags


@jit
def grown(
    slots: np.ndarray, info: np.ndarray, n_tags: int, extra: int
) -> tuple[np.ndarray, np.ndarray]:  # pragma: no cover
    """The table with room for ``extra`` more tags."""
    size = slots.size
    while size // 2 < n_tags + extra:
        size *= 4
    bigger = np.empty((max(2 * info.shape[0], n_tags + extra), info.shape[1]), dtype=np.int64)
    bigger[:n_tags] = info[:n_tags]
    table = np.full(size, -1, dtype=np.int64)
    for t in range(n_tags):
        _place(table, t, bigger[t, HASH])
    return table, bigger


@inlined
def find(
    buf: np.ndarray, off: int, n: int, slots: np.ndarray, info: np.ndarray
) -> tuple[int, np.int64]:  # pragma: no cover
    """``(id, hash)`` of the tag ``buf[off:off + n]``; id -1 if it is not in the table."""
    h = _hash(buf, off, n)
    j = _slot(h, slots.size)
    while slots[j] >= 0:
        t = slots[j]
        if info[t, HASH] == np.int64(h) and info[t, LEN] == n and _same(buf, info[t, OFF], off, n):
            return int(t), np.int64(h)
        j = (j + 1) & (slots.size - 1)
    return -1, np.int64(h)


@jit
def add(
    slots: np.ndarray,
    info: np.ndarray,
    n_tags: int,
    h: int,
    off: int,
    n: int,
    rec_start: int,
    rec_len: int,
    index: int,
    kind: int,
) -> None:  # pragma: no cover
    """Add tag ``n_tags`` (``buf[off:off + n]``, hash ``h``, not in the table yet; there is
    :func:`room`) from its first value: the ``index``-th of its record, of ``kind``."""
    info[n_tags, OFF], info[n_tags, LEN], info[n_tags, HASH] = off, n, h
    info[n_tags, REC_START], info[n_tags, REC_LEN], info[n_tags, INDEX], info[n_tags, KIND] = (
        rec_start,
        rec_len,
        index,
        kind,
    )
    _place(slots, n_tags, h)


@jit
def _place(slots: np.ndarray, t: int, h: int) -> None:  # pragma: no cover
    """Put tag ``t`` (hash ``h``) in the first free slot from its own."""
    j = _slot(np.uint64(h), slots.size)
    while slots[j] >= 0:
        j = (j + 1) & (slots.size - 1)
    slots[j] = t
