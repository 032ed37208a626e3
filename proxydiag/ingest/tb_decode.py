"""Bulk decode of ``Event`` protos into one row per summary value, in one compiled pass.

The walker (``tensorboard/compat/proto/event.proto``, ``summary.proto``) reads, per
record, ``wall_time`` (field 1) and ``step`` (field 2) and, per ``Summary.Value``: the
tag, the plugin metadata (present on the first event of a tag in TF2, on every event for
torch ``new_style``), and the scalar payload (``simple_value`` or a one-element tensor, see
:mod:`proxydiag.ingest.tb_wire`). Images, histograms and audio are :data:`SKIP`. A record
that does not walk is flagged ``malformed`` and left to protobuf.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from proxydiag.ingest.tb_crc import jit
from proxydiag.ingest.tb_layout import _fast
from proxydiag.ingest.tb_wire import (
    KIND,
    REC,
    SIMPLE,
    SKIP,
    TAG_LEN,
    TAG_OFF,
    _float,
    _len,
    _skip,
    _tensor,
    _varint,
)

_NCOL = 4  # rows of Decoded.rows: REC, TAG_OFF, TAG_LEN, KIND (see tb_wire)


@dataclass(frozen=True)
class Decoded:
    """Fields of every summary value (``rows`` int64, shape (4, n), rows named in
    :mod:`~proxydiag.ingest.tb_wire`; ``values`` float64) and
    per-record ``wall_time``, ``step`` and ``malformed`` flags."""

    rows: np.ndarray
    values: np.ndarray
    wall_time: np.ndarray
    step: np.ndarray
    malformed: np.ndarray


@jit
def _metadata(buf: np.ndarray, pos: int, end: int) -> tuple[int, int, int]:  # pragma: no cover
    """(data_class, plugin_name start, plugin_name length) of a ``SummaryMetadata``."""
    data_class, plug, plug_len = 0, 0, 0
    while pos < end:
        key, pos = _varint(buf, pos, end)
        if pos < 0:
            return -2, 0, 0
        field, wire = np.int64(key >> np.uint64(3)), np.int64(key & np.uint64(7))
        if field == 1 and wire == 2:  # plugin_data { plugin_name = 1; content = 2 }
            start, stop = _len(buf, pos, end)
            if start < 0:
                return -2, 0, 0
            p = start
            while p < stop:
                k2, p = _varint(buf, p, stop)
                if p < 0:
                    return -2, 0, 0
                if np.int64(k2 >> np.uint64(3)) == 1 and np.int64(k2 & np.uint64(7)) == 2:
                    a, b = _len(buf, p, stop)
                    if a < 0:
                        return -2, 0, 0
                    plug, plug_len, p = a, b - a, b
                else:
                    p = _skip(buf, p, stop, np.int64(k2 & np.uint64(7)))
                    if p < 0:
                        return -2, 0, 0
            pos = stop
        elif field == 4 and wire == 0:
            v, pos = _varint(buf, pos, end)
            data_class = int(np.int64(v & np.uint64(0x7FFFFFFF)))
        else:
            pos = _skip(buf, pos, end, wire)
        if pos < 0:
            return -2, 0, 0
    return data_class, plug, plug_len


@jit
def _value(buf: np.ndarray, pos: int, end: int, rows: np.ndarray, i: int, scratch: np.ndarray) -> float:  # pragma: no cover
    """Fill ``rows[i]`` (TAG_OFF..KIND) from a ``Summary.Value``; return its value.
    ``rows[KIND, i]`` is -1 when malformed."""
    rows[TAG_OFF, i], rows[TAG_LEN, i], rows[KIND, i] = 0, 0, SKIP
    value = np.nan
    while pos < end:
        key, pos = _varint(buf, pos, end)
        if pos < 0:
            break
        field, wire = np.int64(key >> np.uint64(3)), np.int64(key & np.uint64(7))
        if field == 2 and wire == 5 and pos + 4 <= end:
            rows[KIND, i], value = SIMPLE, _float(buf, pos, 4, scratch)
            pos += 4
            continue
        if wire != 2 or field not in (1, 3, 4, 5, 6, 8, 9):
            pos = _skip(buf, pos, end, wire)
            if pos < 0:
                break
            continue
        start, stop = _len(buf, pos, end)
        pos = stop
        if start < 0:
            break
        if field == 1:
            rows[TAG_OFF, i], rows[TAG_LEN, i] = start, stop - start
        elif field == 9:
            if _metadata(buf, start, stop)[0] == -2:
                pos = -1
                break
        elif field == 8:
            kind, value = _tensor(buf, start, stop, scratch)
            rows[KIND, i] = kind
            if kind < 0:
                break
        else:  # obsolete histogram, image, histo, audio: the oneof holds a non-scalar
            rows[KIND, i], value = SKIP, np.nan
    if pos < 0:
        rows[KIND, i] = -1
    return value


@jit
def _decode(buf: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:  # pragma: no cover
    nrec = starts.size
    wall = np.zeros(nrec, dtype=np.float64)
    step = np.zeros(nrec, dtype=np.int64)
    malformed = np.zeros(nrec, dtype=np.bool_)
    rows = np.empty((_NCOL, nrec + 1024), dtype=np.int64)
    values = np.empty(nrec + 1024, dtype=np.float64)
    scratch = np.zeros(8, dtype=np.uint8)
    f4, f8 = scratch[:4].view(np.float32), scratch.view(np.float64)
    nv = 0
    for r in range(nrec):
        pos, end, first = starts[r], starts[r] + lengths[r], nv
        if nv == values.size:
            rows = np.concatenate((rows, np.empty((_NCOL, nv), dtype=np.int64)), axis=1)
            values = np.concatenate((values, np.empty(nv, dtype=np.float64)))
        if _fast(buf, pos, end, r, rows, values, nv, wall, step, scratch, f4, f8):
            nv += 1
            continue
        while pos < end:
            key, pos = _varint(buf, pos, end)
            if pos < 0:
                break
            field, wire = np.int64(key >> np.uint64(3)), np.int64(key & np.uint64(7))
            if field == 1 and wire == 1 and pos + 8 <= end:
                wall[r] = _float(buf, pos, 8, scratch)
                pos += 8
            elif field == 2 and wire == 0:
                v, pos = _varint(buf, pos, end)
                step[r] = np.int64(v)
            elif field == 5 and wire == 2:
                start, stop = _len(buf, pos, end)
                if start < 0:
                    pos = -1
                    break
                if nv + (stop - start) // 2 + 1 > values.size:  # a Value takes >= 2 bytes
                    grow = max(values.size, (stop - start) // 2 + 1)
                    rows = np.concatenate((rows, np.empty((_NCOL, grow), dtype=np.int64)), axis=1)
                    values = np.concatenate((values, np.empty(grow, dtype=np.float64)))
                nv, pos = _summary(buf, start, stop, r, rows, values, nv, scratch)
                if pos < 0:
                    break
            else:
                pos = _skip(buf, pos, end, wire)
                if pos < 0:
                    break
        if pos < 0:
            malformed[r] = True
            nv = first
    return rows[:, :nv], values[:nv], wall, step, malformed


@jit
def _summary(buf: np.ndarray, pos: int, end: int, rec: int, rows: np.ndarray, values: np.ndarray, nv: int, scratch: np.ndarray) -> tuple[int, int]:  # pragma: no cover
    index = 0
    while pos < end:
        key, pos = _varint(buf, pos, end)
        if pos < 0:
            return nv, -1
        if np.int64(key >> np.uint64(3)) == 1 and np.int64(key & np.uint64(7)) == 2:
            start, stop = _len(buf, pos, end)
            if start < 0:
                return nv, -1
            values[nv] = _value(buf, start, stop, rows, nv, scratch)
            if rows[KIND, nv] < 0:
                return nv, -1
            rows[REC, nv] = rec
            rows[KIND, nv] |= index << 3
            nv += 1
            index += 1
            pos = stop
        else:
            pos = _skip(buf, pos, end, np.int64(key & np.uint64(7)))
            if pos < 0:
                return nv, -1
    return nv, end


def decode(buf: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> Decoded:
    """Decode the records at ``starts``/``lengths`` of ``buf`` (see :class:`Decoded`)."""
    rows, values, wall, step, malformed = _decode(buf, starts, lengths)
    return Decoded(rows, values, wall, step, malformed)
