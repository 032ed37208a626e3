"""A file's bytes, memory-mapped, and the byte scans the tabular readers make on them."""

from __future__ import annotations

import mmap
import os
from pathlib import Path

import numpy as np
import polars as pl

from proxydiag.errors import IngestError

#: bytes a scan of a file takes at a time (:func:`count_byte`: within polars' row index;
#: :func:`byte_positions`: a boolean array of that size)
_COUNT_SLICE = 1 << 30


_POSITION_SLICE = 1 << 22


#: a file's content: memory-mapped, or bytes (a copy, after a cut last line was dropped)
Buffer = bytes | mmap.mmap


def map_file(path: Path) -> Buffer:
    """The file's bytes, memory-mapped (no copy; an empty file is ``b""``).

    A map has ``find``, slices and the buffer protocol, but no ``count`` or ``split``, and
    ``in`` only looks for a single byte.
    """
    try:
        with path.open("rb") as fh:
            if os.fstat(fh.fileno()).st_size == 0:
                return b""
            return mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
    except OSError as exc:
        raise IngestError(f"{path}: cannot read ({exc.strerror})") from exc


def release(data: Buffer) -> None:
    """Drop the pages of a memory-mapped file from this process (they stay in the page
    cache, and a later access maps them again): a scan of the whole file made them resident,
    and polars, which reads the file through its own map, would hold a second copy of them
    in the process's memory at its peak. Bytes are left alone.

    >>> release(b"abc")
    """
    if isinstance(data, mmap.mmap) and hasattr(mmap, "MADV_DONTNEED"):
        data.madvise(mmap.MADV_DONTNEED)


def count_byte(data: Buffer, byte: int) -> int:
    """How many times ``byte`` occurs: polars over zero-copy slices (faster than numpy; each
    slice stays within polars' row index).

    >>> count_byte(b'{"a": 1}', ord('"'))
    2
    """
    view = np.frombuffer(data, dtype=np.uint8)
    return sum(
        int(pl.Series(view[at : at + _COUNT_SLICE]).eq(byte).sum())
        for at in range(0, len(view), _COUNT_SLICE)
    )


def byte_positions(data: Buffer, byte: int) -> np.ndarray:
    """The offsets of ``byte``, in order: numpy over 4 MB slices (its boolean array of the
    whole file would be as large as the file).

    >>> byte_positions(b'{"a": 1}', ord('"')).tolist()
    [1, 3]
    """
    view = np.frombuffer(data, dtype=np.uint8)
    return np.concatenate(
        [
            np.zeros(0, dtype=np.int64),
            *(
                np.flatnonzero(view[at : at + _POSITION_SLICE] == byte) + at
                for at in range(0, len(view), _POSITION_SLICE)
            ),
        ]
    )
