"""TFRecord framing of a whole event file in compiled code, every CRC checked.

A record is ``uint64 length | uint32 masked_crc(length) | data | uint32 masked_crc(data)``
(``tensorflow/core/lib/io/record_writer.cc``). :func:`next_record` reads the record at an
offset, and what damage it stepped over:

- a data CRC mismatch skips that record (the length was trustworthy, so framing goes on);
- a header CRC mismatch (garbage, a flipped length byte) resynchronises on the next offset
  where a header *and* its data both check out, or stops when there is none;
- a record cut by the end of the file (a job killed mid-write, a file still being written)
  ends the read there.

The decoder (:mod:`~proxydiag.ingest.tensorboard._decode`) calls it record by record, so framing,
CRC and decoding are one pass over the file; :func:`frame` lists every record (the protobuf route).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from proxydiag.ingest.tensorboard._jit import inlined, jit, read_u32, read_u64
from proxydiag.ingest.tensorboard.crc import record_crc

#: what :func:`next_record` found: an intact record, or a kind of damage
INTACT, DATA_CRC, BAD_HEADER, TRUNCATED = 0, 1, 2, 3
_HEADER = 12
_MIN_RECORD = 16
#: damaged places kept with their offsets (the rest are only counted)
MAX_PROBLEMS = 256


@dataclass(frozen=True)
class Framing:
    """Intact records of one buffer and the damage found between them.

    ``starts``/``lengths`` locate each record's data; ``problems`` rows are
    ``(kind, offset, detail)`` (see :func:`next_record`), ``n_problems`` counts them all.
    """

    starts: np.ndarray
    lengths: np.ndarray
    problems: np.ndarray
    n_problems: int


@inlined
def _record_ok(buf: np.ndarray, pos: int) -> bool:  # pragma: no cover
    """A header and its data both check out at ``pos`` (used to resynchronise)."""
    n = buf.size
    if pos + _MIN_RECORD > n or record_crc(buf, pos, 8) != read_u32(buf, pos + 8):
        return False
    length = read_u64(buf, pos)
    if length > np.uint64(n - pos - _MIN_RECORD):
        return False
    size = int(np.int64(length))
    return bool(record_crc(buf, pos + _HEADER, size) == read_u32(buf, pos + _HEADER + size))


@inlined
def next_record(buf: np.ndarray, pos: int) -> tuple[int, int, int, int]:  # pragma: no cover
    """``(kind, start, size, detail)`` of the record at ``pos`` (``pos < buf.size``); the next
    record is at ``start + size + 4`` in every case.

    :data:`INTACT` and :data:`DATA_CRC`: the data is ``buf[start:start + size]``, ``detail``
    is ``size``. :data:`BAD_HEADER`: reading resumes at ``start``, ``detail`` the same (-1:
    nowhere, ``start`` is ``buf.size``). :data:`TRUNCATED`: ``detail`` bytes were left, ``start``
    is ``buf.size``. Without a record, ``size`` is -4.
    """
    n = buf.size
    if n - pos < _HEADER:
        return TRUNCATED, n, -4, n - pos
    if record_crc(buf, pos, 8) != read_u32(buf, pos + 8):
        nxt = pos + 1
        while nxt < n and not _record_ok(buf, nxt):
            nxt += 1
        return BAD_HEADER, nxt, -4, nxt if nxt < n else -1
    length = read_u64(buf, pos)
    if length > np.uint64(n - pos - _MIN_RECORD):
        return TRUNCATED, n, -4, n - pos
    size = int(np.int64(length))
    start = pos + _HEADER
    kind = INTACT if record_crc(buf, start, size) == read_u32(buf, start + size) else DATA_CRC
    return kind, start, size, size


@jit
def note_problem(
    problems: np.ndarray, n_problems: int, kind: int, offset: int, detail: int
) -> int:  # pragma: no cover
    """Keep a damaged place in ``problems`` (while there is room); the new count."""
    if n_problems < problems.shape[0]:
        problems[n_problems, 0], problems[n_problems, 1], problems[n_problems, 2] = (
            kind,
            offset,
            detail,
        )
    return n_problems + 1


@jit
def _frame(buf: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:  # pragma: no cover
    n = buf.size
    starts = np.empty(n // _MIN_RECORD + 1, dtype=np.int64)  # room for any file; untouched
    lengths = np.empty(n // _MIN_RECORD + 1, dtype=np.int64)  # pages are never resident
    problems = np.zeros((MAX_PROBLEMS, 3), dtype=np.int64)
    count, n_problems, pos = 0, 0, 0
    while pos < n:
        kind, start, size, detail = next_record(buf, pos)
        if kind == INTACT:
            starts[count], lengths[count] = start, size
            count += 1
        else:
            n_problems = note_problem(problems, n_problems, kind, pos, detail)
        pos = start + size + 4
    return starts[:count], lengths[:count], problems, n_problems


def frame(buf: np.ndarray) -> Framing:
    """Frame every record of ``buf`` (a uint8 array of a whole event file).

    >>> from proxydiag.ingest.tensorboard.crc import masked
    >>> import struct
    >>> data = b"hello"
    >>> head = struct.pack("<Q", len(data))
    >>> rec = head + struct.pack("<I", masked(head)) + data + struct.pack("<I", masked(data))
    >>> f = frame(np.frombuffer(rec + rec[:7], dtype=np.uint8))
    >>> f.starts.tolist(), f.lengths.tolist(), f.problems[0].tolist()
    ([12], [5], [3, 21, 7])
    """
    starts, lengths, problems, n_problems = _frame(buf)
    return Framing(starts, lengths, problems[: min(n_problems, MAX_PROBLEMS)], int(n_problems))


def describe(kind: int, offset: int, detail: int, *, path: str) -> str:
    """One line about a damaged place, naming ``file@offset`` and what was done.

    >>> describe(DATA_CRC, 40, 18, path="ev")
    'ev@40: CRC mismatch in a record of 18 bytes; record skipped'
    """
    at = f"{path}@{offset}"
    if kind == DATA_CRC:
        return f"{at}: CRC mismatch in a record of {detail} bytes; record skipped"
    if kind == TRUNCATED:
        return (
            f"{at}: file ends inside a record ({detail} bytes left; "
            "truncated or still being written); read up to here"
        )
    if detail < 0:
        return (
            f"{at}: corrupt record header (length CRC mismatch) and no intact record after it; "
            f"the rest of the file ({path}) is ignored"
        )
    return (
        f"{at}: corrupt record header or garbage ({detail - offset} bytes); "
        f"skipped to the next intact record at {path}@{detail}"
    )
