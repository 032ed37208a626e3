"""One compiled pass over an event file: framing, CRCs, decoding and tag numbering.

For each record (:func:`~proxydiag.ingest.tensorboard._records.next_record`, every CRC checked) the
scan tries the writers' template (:mod:`~proxydiag.ingest.tensorboard._layout`) and otherwise walks
the ``Event`` proto (``tensorboard/compat/proto/event.proto``, ``summary.proto``):
``wall_time`` (field 1), ``step`` (field 2) and, per ``Summary.Value``, the tag, the plugin
metadata (present on the first event of a tag in TF2, on every event for torch
``new_style``) and the scalar payload (``simple_value`` or a one-element tensor, see
:mod:`proxydiag.ingest.tensorboard._wire`). Images, histograms and audio are :data:`SKIP` values. A
record that does not walk is counted ``malformed`` and left to protobuf.

The output has one entry per summary value in file order (:class:`Decoded`), written
straight into columns sized for the file's template records; the tag of each value is
numbered on the way (:mod:`~proxydiag.ingest.tensorboard._tags`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from proxydiag.ingest.tensorboard import _tags as tb_tags
from proxydiag.ingest.tensorboard._jit import borrowed, jit
from proxydiag.ingest.tensorboard._layout import match
from proxydiag.ingest.tensorboard._records import INTACT, MAX_PROBLEMS, next_record, note_problem
from proxydiag.ingest.tensorboard._wire import (
    NO_MATCH,
    PYTHON,
    SIMPLE,
    SKIP,
    _len,
    _skip,
    _tag,
    _tensor,
    _varint,
    f32,
    f64,
)

#: columns of the walker's per-record ``fields``: where the value's tag lies, its kind
_OFF, _LEN, _KIND = range(3)
#: what the walker returns for a record with more values than its scratch holds
_FULL = -2
#: columns of :attr:`Decoded.python`
PY_VALUE, PY_START, PY_LEN, PY_INDEX = range(4)
#: entries of the scan's ``counts``: values, tags, PYTHON values, damaged places, malformed
#: records, intact records
_NV, _TAGS, _PYTHON, _PROBLEMS, _MALFORMED, _RECORDS = range(6)
#: the smallest framed record the template matches (16 bytes of framing, 22 of event):
#: the columns are first sized for this many values per byte
_TEMPLATE_BYTES = 38


@dataclass(frozen=True)
class Decoded:
    """Every summary value of an event file, in file order, and what was damaged.

    Per value: ``step``, ``wall_time``, ``value`` (float64, NaN unless the kind is
    ``SIMPLE``/``TENSOR_F32``/``TENSOR_F64``), ``tag`` (an id, a row of ``tags``) and
    ``kind``. ``tags`` is the tag table's ``info`` (columns in
    :mod:`~proxydiag.ingest.tensorboard._tags`); ``python`` locates the ``PYTHON`` values (columns
    :data:`PY_VALUE` ... :data:`PY_INDEX`); ``problems``/``n_problems`` the framing damage (see
    :class:`~proxydiag.ingest.tensorboard._records.Framing`); ``first_wall_time`` is the first
    intact record's (inf: none).
    """

    step: np.ndarray
    wall_time: np.ndarray
    value: np.ndarray
    tag: np.ndarray
    kind: np.ndarray
    tags: np.ndarray
    python: np.ndarray
    problems: np.ndarray
    n_problems: int
    n_malformed: int
    first_wall_time: float


@jit
def _metadata(buf: np.ndarray, pos: int, end: int) -> tuple[int, int, int]:  # pragma: no cover
    """(data_class, plugin_name start, plugin_name length) of a ``SummaryMetadata``."""
    data_class, plug, plug_len = 0, 0, 0
    while pos < end:
        field, wire, pos = _tag(buf, pos, end)
        if pos < 0:
            return -2, 0, 0
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
def _value(
    buf: np.ndarray, pos: int, end: int, fields: np.ndarray, i: int
) -> float:  # pragma: no cover
    """Fill ``fields[i]`` from a ``Summary.Value``; return its number. Kind -1: malformed."""
    fields[i, _OFF], fields[i, _LEN], fields[i, _KIND] = 0, 0, SKIP
    value = np.nan
    while pos < end:
        field, wire, pos = _tag(buf, pos, end)
        if pos < 0:
            break
        if field == 2 and wire == 5 and pos + 4 <= end:
            fields[i, _KIND], value = SIMPLE, f32(buf, pos)
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
            fields[i, _OFF], fields[i, _LEN] = start, stop - start
        elif field == 9:
            if _metadata(buf, start, stop)[0] == -2:
                pos = -1
                break
        elif field == 8:
            kind, value = _tensor(buf, start, stop)
            fields[i, _KIND] = kind
            if kind < 0:
                break
        else:  # obsolete histogram, image, histo, audio: the oneof holds a non-scalar
            fields[i, _KIND], value = SKIP, np.nan
    if pos < 0:
        fields[i, _KIND] = -1
    return value


@jit
def _walk(
    buf: np.ndarray, pos: int, end: int, fields: np.ndarray, numbers: np.ndarray
) -> tuple[int, np.int64, float]:  # pragma: no cover
    """Walk the Event ``buf[pos:end]``: ``(values, step, wall_time)``, each value's tag and kind
    in ``fields`` and number in ``numbers``; values -1: malformed, :data:`_FULL`: more values
    than ``numbers`` has room for. Fields repeat as protobuf merges them: the last
    ``wall_time``/``step`` wins, the values of every ``summary`` add up."""
    wall, step, nv = 0.0, np.int64(0), 0
    while pos < end:
        field, wire, pos = _tag(buf, pos, end)
        if pos < 0:
            break
        if field == 1 and wire == 1 and pos + 8 <= end:
            wall = f64(buf, pos)
            pos += 8
        elif field == 2 and wire == 0:
            v, pos = _varint(buf, pos, end)
            step = np.int64(v)
        elif field == 5 and wire == 2:
            start, stop = _len(buf, pos, end)
            pos = stop if start >= 0 else -1
            while 0 <= start < stop:  # Summary { repeated Value value = 1; }
                key, start = _varint(buf, start, stop)
                if start < 0:
                    pos = -1
                elif np.int64(key >> np.uint64(3)) == 1 and np.int64(key & np.uint64(7)) == 2:
                    a, start = _len(buf, start, stop)
                    if a < 0:
                        pos = -1
                        break
                    if nv == numbers.size:
                        return _FULL, step, wall
                    numbers[nv] = _value(buf, a, start, fields, nv)
                    if fields[nv, _KIND] < 0:
                        pos = -1
                        break
                    nv += 1
                else:
                    start = _skip(buf, start, stop, np.int64(key & np.uint64(7)))
                    if start < 0:
                        pos = -1
        else:
            pos = _skip(buf, pos, end, wire)
        if pos < 0:
            break
    return (nv if pos >= 0 else -1), step, wall


@jit
def _run(
    data: np.ndarray,
    pos: int,
    cols: tuple[np.ndarray, ...],
    table: tuple[np.ndarray, np.ndarray],
    python: np.ndarray,
    problems: np.ndarray,
    scratch: tuple[np.ndarray, np.ndarray],
    counts: np.ndarray,
    first_wall: np.ndarray,
) -> tuple[int, int, int]:  # pragma: no cover
    """Scan the records of ``data`` from ``pos`` on, into the arrays, until the end or a record
    that needs more room than they have: ``(pos, values, scratch)``, where to go on and, for
    the record there, how many values it holds or how many walker scratch rows it needs
    (0, 0: the end). The arrays are borrowed (:func:`~proxydiag.ingest.tensorboard._jit.borrowed`)
    and never replaced, so the helpers called per record count no references."""
    buf, slots, info, problems = (
        borrowed(data),
        borrowed(table[0]),
        borrowed(table[1]),
        borrowed(problems),
    )
    fields, numbers = borrowed(scratch[0]), borrowed(scratch[1])
    step, wall, value, tag, kind = cols
    n = buf.size
    nv, n_tags, n_python, n_records = counts[_NV], counts[_TAGS], counts[_PYTHON], counts[_RECORDS]
    max_tags = n_tags + tb_tags.room(slots, info, n_tags)
    need_values, need_scratch = 0, 0
    while pos < n:
        rec_kind, start, size, detail = next_record(buf, pos)
        if rec_kind != INTACT:
            counts[_PROBLEMS] = note_problem(problems, counts[_PROBLEMS], rec_kind, pos, detail)
            pos = start + size + 4
            continue
        end = start + size
        vkind, t_off, t_len, rec_step, rec_wall, number = match(buf, start, end)
        walked = vkind == NO_MATCH
        count = 1
        if walked:
            count, rec_step, rec_wall = _walk(buf, start, end, fields, numbers)
        if count == _FULL:
            need_scratch = 2 * numbers.size
            break
        if count > min(step.size - nv, python.shape[0] - n_python, max_tags - n_tags):
            need_values = count
            break
        if n_records == 0:
            first_wall[0] = rec_wall
        n_records += 1
        pos = end + 4
        if count < 0:
            counts[_MALFORMED] += 1
            continue
        for i in range(count):  # the template's one value is in locals already (faster)
            if walked:
                t_off, t_len, vkind, number = (
                    fields[i, _OFF],
                    fields[i, _LEN],
                    fields[i, _KIND],
                    numbers[i],
                )
            t, h = tb_tags.find(buf, t_off, t_len, slots, info)
            if t < 0:
                tb_tags.add(slots, info, n_tags, h, t_off, t_len, start, size, i, vkind)
                t, n_tags = n_tags, n_tags + 1
            if vkind == PYTHON:
                python[n_python, PY_VALUE], python[n_python, PY_START] = nv, start
                python[n_python, PY_LEN], python[n_python, PY_INDEX] = size, i
                n_python += 1
            step[nv], wall[nv], value[nv], tag[nv], kind[nv] = rec_step, rec_wall, number, t, vkind
            nv += 1
    counts[_NV], counts[_TAGS], counts[_PYTHON], counts[_RECORDS] = nv, n_tags, n_python, n_records
    return pos, need_values, need_scratch


def decode(buf: np.ndarray) -> Decoded:
    """Frame and decode every record of ``buf`` (the bytes of one event file).

    The columns are numpy's (large ones get transparent huge pages: a third of the cost of
    first touching them) and sized for the template's smallest record, so they rarely
    grow; between calls of :func:`_run`, what a record found too small grows here.
    """
    buf = np.ascontiguousarray(buf)
    cap = buf.size // _TEMPLATE_BYTES + 16  # pages never written are never resident: slack is free
    cols: tuple[np.ndarray, ...] = (
        np.empty(cap, dtype=np.int64),
        np.empty(cap, dtype=np.float64),
        np.empty(cap, dtype=np.float64),
        np.empty(cap, dtype=np.int32),
        np.empty(cap, dtype=np.int8),
    )
    table = tb_tags.new_table()
    python = np.empty((16, 4), dtype=np.int64)
    problems = np.zeros((MAX_PROBLEMS, 3), dtype=np.int64)
    scratch = (np.empty((64, 3), dtype=np.int64), np.empty(64, dtype=np.float64))
    counts = np.zeros(6, dtype=np.int64)
    first_wall = np.full(1, np.inf)
    pos = 0
    while pos < buf.size:
        pos, values, need = _run(
            buf, pos, cols, table, python, problems, scratch, counts, first_wall
        )
        nv, n_tags, n_python = (int(c) for c in counts[[_NV, _TAGS, _PYTHON]])
        if need:
            scratch = (np.empty((need, 3), dtype=np.int64), np.empty(need, dtype=np.float64))
        if values > cols[0].size - nv:
            cols = tuple(_grown(col, max(2 * col.size, nv + values)) for col in cols)
        if values > python.shape[0] - n_python:
            python = _grown(python, max(2 * python.shape[0], n_python + values))
        if values > tb_tags.room(*table, n_tags):
            table = tb_tags.grown(*table, n_tags, values)
    nv, n_tags, n_python = (int(c) for c in counts[[_NV, _TAGS, _PYTHON]])
    step, wall, value, tag, kind = (col[:nv] for col in cols)
    n_problems = int(counts[_PROBLEMS])
    return Decoded(
        step,
        wall,
        value,
        tag,
        kind,
        table[1][:n_tags],
        python[:n_python],
        problems[: min(n_problems, MAX_PROBLEMS)],
        n_problems,
        int(counts[_MALFORMED]),
        float(first_wall[0]),
    )


def _grown(arr: np.ndarray, size: int) -> np.ndarray:
    """``arr`` copied into a larger array of ``size`` rows."""
    out = np.empty((size, *arr.shape[1:]), dtype=arr.dtype)
    out[: len(arr)] = arr
    return out
