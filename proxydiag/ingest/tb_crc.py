"""CRC32C for TFRecord framing, compiled with numba (slicing-by-8 tables).

TFRecord stores *masked* CRC32C checksums (``tensorflow/core/lib/hash/crc32c.h``):
``((crc >> 15) | (crc << 17)) + 0xa282ead8`` modulo 2**32. A Python call per record to a
native CRC library tops out near 0.8M records/s; checking every record inside one compiled
loop costs a few ns per byte instead.

numba compiles on first use; ``cache=True`` keeps the machine code beside this module (or
in ``NUMBA_CACHE_DIR``) so later processes load it in milliseconds. Where no cache location
is writable, :func:`jit` compiles without a cache rather than failing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numba
import numpy as np

_POLY = 0x82F63B78  # Castagnoli, reflected
_MASK_DELTA = 0xA282EAD8
_U32 = 0xFFFFFFFF


def jit(fn: Callable[..., Any]) -> Any:
    """``numba.njit`` with an on-disk cache, or without one where no cache dir is writable."""
    try:
        return numba.njit(cache=True, nogil=True)(fn)
    except (RuntimeError, OSError):  # numba: "no locator available" for a read-only tree
        return numba.njit(nogil=True)(fn)


def _tables() -> np.ndarray:
    table = np.zeros((8, 256), dtype=np.uint64)
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ _POLY if c & 1 else c >> 1
        table[0, i] = c
    for i in range(256):
        c = int(table[0, i])
        for k in range(1, 8):
            c = int(table[0, c & 0xFF]) ^ (c >> 8)
            table[k, i] = c
    return table


TABLES = _tables()


@jit
def masked_crc32c(buf: np.ndarray, start: int, length: int, table: np.ndarray) -> np.int64:  # pragma: no cover
    """The masked CRC32C TFRecord stores for ``buf[start:start + length]``.

    CRC and mask in one function: numba does not inline calls between separately cached
    functions, and this runs twice per record.
    """
    crc = np.uint64(_U32)
    i = start
    end = start + length
    while i + 8 <= end:
        lo = crc ^ (
            np.uint64(buf[i])
            | (np.uint64(buf[i + 1]) << np.uint64(8))
            | (np.uint64(buf[i + 2]) << np.uint64(16))
            | (np.uint64(buf[i + 3]) << np.uint64(24))
        )
        crc = (
            table[7, lo & np.uint64(0xFF)]
            ^ table[6, (lo >> np.uint64(8)) & np.uint64(0xFF)]
            ^ table[5, (lo >> np.uint64(16)) & np.uint64(0xFF)]
            ^ table[4, (lo >> np.uint64(24)) & np.uint64(0xFF)]
            ^ table[3, buf[i + 4]]
            ^ table[2, buf[i + 5]]
            ^ table[1, buf[i + 6]]
            ^ table[0, buf[i + 7]]
        )
        i += 8
    while i < end:
        crc = table[0, (crc ^ np.uint64(buf[i])) & np.uint64(0xFF)] ^ (crc >> np.uint64(8))
        i += 1
    crc ^= np.uint64(_U32)
    rot = ((crc >> np.uint64(15)) | (crc << np.uint64(17))) & np.uint64(_U32)
    return np.int64((rot + np.uint64(_MASK_DELTA)) & np.uint64(_U32))


@jit
def read_u32(buf: np.ndarray, pos: int) -> np.int64:  # pragma: no cover
    """Little-endian uint32 at ``buf[pos]``."""
    out = np.uint64(0)
    for k in range(4):
        out |= np.uint64(buf[pos + k]) << np.uint64(8 * k)
    return np.int64(out)


@jit
def read_u64(buf: np.ndarray, pos: int) -> np.uint64:  # pragma: no cover
    """Little-endian uint64 at ``buf[pos]``."""
    out = np.uint64(0)
    for k in range(8):
        out |= np.uint64(buf[pos + k]) << np.uint64(8 * k)
    return out


def masked(data: bytes) -> int:
    """Masked CRC32C of ``data`` (Python entry point, used by tests and the bulk writer).

    >>> hex(masked(b""))
    '0xa282ead8'
    >>> import google_crc32c
    >>> c = google_crc32c.value(b"tfevents")
    >>> masked(b"tfevents") == ((((c >> 15) | (c << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF
    True
    """
    arr = np.frombuffer(data, dtype=np.uint8)
    return int(masked_crc32c(arr, 0, arr.size, TABLES))
