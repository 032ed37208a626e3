"""Interning of tag byte strings into small integer ids, in one compiled pass.

A run has tens to thousands of tags but up to millions of values; hashing each value's
tag bytes (FNV-1a) into an open-addressing table and comparing the bytes against the
table's representative gives each value its tag id without making a Python string per value.
"""

from __future__ import annotations

import numpy as np

from proxydiag.ingest.tb_crc import jit

_FNV_OFFSET = 0xCBF29CE484222325
_FNV_PRIME = 0x100000001B3


@jit
def _hash(buf: np.ndarray, off: int, n: int) -> np.uint64:  # pragma: no cover
    h = np.uint64(_FNV_OFFSET)
    for i in range(off, off + n):
        h = (h ^ np.uint64(buf[i])) * np.uint64(_FNV_PRIME)
    return h


@jit
def _same(buf: np.ndarray, a: int, b: int, n: int) -> bool:  # pragma: no cover
    for i in range(n):  # noqa: SIM110 (numba: a plain loop, no generator)
        if buf[a + i] != buf[b + i]:
            return False
    return True


@jit
def _intern(buf: np.ndarray, offs: np.ndarray, lens: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:  # pragma: no cover
    n = offs.size
    ids = np.empty(n, dtype=np.int64)
    first = np.empty(64, dtype=np.int64)  # row of each tag's first occurrence
    cap = 256
    slots = np.full(cap, -1, dtype=np.int64)
    hashes = np.zeros(cap, dtype=np.uint64)
    n_tags = 0
    for i in range(n):
        h = _hash(buf, offs[i], lens[i])
        j = np.int64(h & np.uint64(cap - 1))
        while True:
            t = slots[j]
            if t < 0:
                if n_tags == first.size:
                    first = np.concatenate((first, np.empty(first.size, dtype=np.int64)))
                first[n_tags] = i
                slots[j], hashes[j] = n_tags, h
                ids[i] = n_tags
                n_tags += 1
                break
            r = first[t]
            if hashes[j] == h and lens[r] == lens[i] and _same(buf, offs[r], offs[i], lens[i]):
                ids[i] = t
                break
            j = (j + 1) & (cap - 1)
        if n_tags * 2 > cap:  # keep the table at most half full
            cap *= 4
            slots = np.full(cap, -1, dtype=np.int64)
            hashes = np.zeros(cap, dtype=np.uint64)
            for t in range(n_tags):
                hh = _hash(buf, offs[first[t]], lens[first[t]])
                j = np.int64(hh & np.uint64(cap - 1))
                while slots[j] >= 0:
                    j = (j + 1) & (cap - 1)
                slots[j], hashes[j] = t, hh
    return ids, first[:n_tags], n_tags


def intern(buf: np.ndarray, offs: np.ndarray, lens: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(ids, first)``: a tag id per value and the row of each tag's first occurrence.

    >>> buf = np.frombuffer(b"lossgnormloss", dtype=np.uint8)
    >>> ids, first = intern(buf, np.array([0, 4, 9]), np.array([4, 5, 4]))
    >>> ids.tolist(), first.tolist()
    ([0, 1, 0], [0, 1])
    """
    ids, first, _ = _intern(buf, np.ascontiguousarray(offs), np.ascontiguousarray(lens))
    return ids, first
