"""TFRecord framing of a whole event file in one compiled pass, every CRC checked.

A record is ``uint64 length | uint32 masked_crc(length) | data | uint32 masked_crc(data)``
(``tensorflow/core/lib/io/record_writer.cc``). :func:`frame` returns where each intact
record's data lies, plus the damage it stepped over:

- a data CRC mismatch skips that record (the length was trustworthy, so framing goes on);
- a header CRC mismatch (garbage, a flipped length byte) resynchronises on the next offset
  where a header *and* its data both check out, or stops when there is none;
- a record cut by the end of the file (a job killed mid-write, a file still being written)
  ends the read there.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from proxydiag.ingest.tb_crc import TABLES, jit, masked_crc32c, read_u32, read_u64

#: damage kinds reported by :func:`frame`
DATA_CRC, BAD_HEADER, TRUNCATED = 1, 2, 3
_HEADER = 12
_MIN_RECORD = 16
_MAX_PROBLEMS = 256


@dataclass(frozen=True)
class Framing:
    """Intact records of one buffer and the damage found between them.

    ``starts``/``lengths`` locate each record's data; ``problems`` rows are
    ``(kind, offset, detail)``: for :data:`BAD_HEADER` ``detail`` is the offset where reading
    resumed (-1: nowhere), for :data:`TRUNCATED` the bytes left, else the record's length.
    """

    starts: np.ndarray
    lengths: np.ndarray
    problems: np.ndarray
    n_problems: int


@jit
def _grow(arr: np.ndarray) -> np.ndarray:  # pragma: no cover
    out = np.empty(arr.size * 2, dtype=arr.dtype)
    out[: arr.size] = arr
    return out


@jit
def _header_ok(buf: np.ndarray, pos: int, table: np.ndarray) -> bool:  # pragma: no cover
    stored = (
        np.int64(buf[pos + 8]) | (np.int64(buf[pos + 9]) << 8)
        | (np.int64(buf[pos + 10]) << 16) | (np.int64(buf[pos + 11]) << 24)
    )
    return bool(masked_crc32c(buf, pos, 8, table) == stored)


@jit
def _record_ok(buf: np.ndarray, pos: int, table: np.ndarray) -> bool:  # pragma: no cover
    """A header and its data both check out at ``pos`` (used to resynchronise)."""
    n = buf.size
    if pos + _MIN_RECORD > n or not _header_ok(buf, pos, table):
        return False
    length = read_u64(buf, pos)
    if length > np.uint64(n - pos - _MIN_RECORD):
        return False
    size = int(np.int64(length))
    return bool(masked_crc32c(buf, pos + _HEADER, size, table) == read_u32(buf, pos + _HEADER + size))


@jit
def _frame(buf: np.ndarray, table: np.ndarray) -> tuple[np.ndarray, np.ndarray, int, np.ndarray, int]:  # pragma: no cover
    n = buf.size
    starts = np.empty(n // 64 + 16, dtype=np.int64)
    lengths = np.empty(n // 64 + 16, dtype=np.int64)
    problems = np.zeros((_MAX_PROBLEMS, 3), dtype=np.int64)
    count = 0
    n_problems = 0
    pos = 0
    while pos < n:
        kind = 0
        detail = 0
        where = pos
        if n - pos < _HEADER:
            kind, detail, pos = TRUNCATED, n - pos, n
        elif masked_crc32c(buf, pos, 8, table) != (
            np.int64(buf[pos + 8]) | (np.int64(buf[pos + 9]) << 8)
            | (np.int64(buf[pos + 10]) << 16) | (np.int64(buf[pos + 11]) << 24)
        ):
            nxt = pos + 1
            while nxt < n and not _record_ok(buf, nxt, table):
                nxt += 1
            if nxt >= n:
                kind, detail, pos = BAD_HEADER, -1, n
            else:
                kind, detail, pos = BAD_HEADER, nxt, nxt
        else:
            length = np.uint64(0)
            for k in range(8):
                length |= np.uint64(buf[pos + k]) << np.uint64(8 * k)
            if length > np.uint64(n - pos - _MIN_RECORD):
                kind, detail, pos = TRUNCATED, n - pos, n
            else:
                size = int(np.int64(length))
                data = pos + _HEADER
                e = data + size
                stored = (
                    np.int64(buf[e]) | (np.int64(buf[e + 1]) << 8)
                    | (np.int64(buf[e + 2]) << 16) | (np.int64(buf[e + 3]) << 24)
                )
                if masked_crc32c(buf, data, size, table) == stored:
                    if count == starts.size:
                        starts = _grow(starts)
                        lengths = _grow(lengths)
                    starts[count] = data
                    lengths[count] = size
                    count += 1
                else:
                    kind, detail = DATA_CRC, size
                pos = data + size + 4
        if kind != 0:
            if n_problems < _MAX_PROBLEMS:
                problems[n_problems, 0] = kind
                problems[n_problems, 1] = where
                problems[n_problems, 2] = detail
            n_problems += 1
    return starts[:count], lengths[:count], count, problems, n_problems


def frame(buf: np.ndarray) -> Framing:
    """Frame every record of ``buf`` (a uint8 array of a whole event file).

    >>> from proxydiag.ingest.tb_crc import masked
    >>> import struct
    >>> data = b"hello"
    >>> head = struct.pack("<Q", len(data))
    >>> rec = head + struct.pack("<I", masked(head)) + data + struct.pack("<I", masked(data))
    >>> f = frame(np.frombuffer(rec + rec[:7], dtype=np.uint8))
    >>> f.starts.tolist(), f.lengths.tolist(), f.problems[0].tolist()
    ([12], [5], [3, 21, 7])
    """
    starts, lengths, _, problems, n_problems = _frame(buf, TABLES)
    return Framing(starts, lengths, problems[: min(n_problems, _MAX_PROBLEMS)], int(n_problems))


def describe(kind: int, offset: int, detail: int, *, path: str) -> str:
    """One line about a damaged place, naming ``file@offset`` and what was done.

    >>> describe(DATA_CRC, 40, 18, path="ev")
    'ev@40: CRC mismatch in a record of 18 bytes; record skipped'
    """
    at = f"{path}@{offset}"
    if kind == DATA_CRC:
        return f"{at}: CRC mismatch in a record of {detail} bytes; record skipped"
    if kind == TRUNCATED:
        return f"{at}: file ends inside a record ({detail} bytes left; truncated or still being written); read up to here"
    if detail < 0:
        return f"{at}: corrupt record header (length CRC mismatch) and no intact record after it; the rest of the file ({path}) is ignored"
    return f"{at}: corrupt record header or garbage ({detail - offset} bytes); skipped to the next intact record at {path}@{detail}"
