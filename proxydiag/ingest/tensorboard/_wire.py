"""Protobuf wire-format primitives for the compiled event decoder, and ``TensorProto``.

Bounds-checked: every function returns -1 (or kind -1) instead of reading past ``end``, so a
record that passed its CRC but is not a valid proto cannot crash or hang the decoder.
Unknown fields are skipped by wire type, as protobuf does.
"""

from __future__ import annotations

import numpy as np

from proxydiag.ingest.tensorboard._jit import inlined, jit, read_u32, read_u64

#: value kinds (PYTHON: a one-element tensor of another dtype, left to protobuf);
#: NO_MATCH: a record the template of :mod:`~proxydiag.ingest.tensorboard._layout` does not fit
SKIP, SIMPLE, TENSOR_F32, TENSOR_F64, PYTHON, NO_MATCH = 0, 1, 2, 3, 4, -1
_DT_FLOAT, _DT_DOUBLE, _DT_STRING = 1, 2, 7


@jit
def _varint(buf: np.ndarray, pos: int, end: int) -> tuple[np.uint64, int]:  # pragma: no cover
    out = np.uint64(0)
    shift = 0
    while pos < end and shift < 64:
        b = buf[pos]
        pos += 1
        out |= np.uint64(b & 0x7F) << np.uint64(shift)
        if b < 0x80:
            return out, pos
        shift += 7
    return out, -1


@inlined
def _tag(buf: np.ndarray, pos: int, end: int) -> tuple[np.int64, np.int64, int]:  # pragma: no cover
    """(field number, wire type, position after it) of the field key at ``pos``; the position
    is -1 when the key is malformed."""
    key, pos = _varint(buf, pos, end)
    return np.int64(key >> np.uint64(3)), np.int64(key & np.uint64(7)), pos


@jit
def _skip(buf: np.ndarray, pos: int, end: int, wire: int) -> int:  # pragma: no cover
    """Position after a field of wire type ``wire`` starting at ``pos``; -1 if malformed."""
    if wire == 0:
        return int(_varint(buf, pos, end)[1])
    if wire == 1:
        return pos + 8 if pos + 8 <= end else -1
    if wire == 5:
        return pos + 4 if pos + 4 <= end else -1
    if wire == 2:
        size, pos = _varint(buf, pos, end)
        if pos < 0 or size > np.uint64(end - pos):
            return -1
        return pos + int(np.int64(size))
    return -1  # groups (3, 4) and invalid wire types


@jit
def _len(buf: np.ndarray, pos: int, end: int) -> tuple[int, int]:  # pragma: no cover
    """A length-delimited field: (start, stop) of its payload, or (-1, -1)."""
    size, pos = _varint(buf, pos, end)
    if pos < 0 or size > np.uint64(end - pos):
        return -1, -1
    return pos, pos + int(np.int64(size))


@inlined
def f32(buf: np.ndarray, pos: int) -> float:  # pragma: no cover
    """The little-endian float32 at ``buf[pos]``, widened exactly to float64."""
    return float(np.uint32(read_u32(buf, pos)).view(np.float32))


@inlined
def f64(buf: np.ndarray, pos: int) -> float:  # pragma: no cover
    """The little-endian float64 at ``buf[pos]``."""
    return float(np.uint64(read_u64(buf, pos)).view(np.float64))


@jit
def _shape_numel(buf: np.ndarray, pos: int, end: int) -> int:  # pragma: no cover
    """Elements of a ``TensorShapeProto`` (1 for a scalar); -2 if malformed, -1 if unknown."""
    numel = 1
    while pos < end:
        field, wire, pos = _tag(buf, pos, end)
        if pos < 0:
            return -2
        if field == 2 and wire == 2:
            start, stop = _len(buf, pos, end)
            if start < 0:
                return -2
            size = 1
            p = start
            while p < stop:
                k2, p = _varint(buf, p, stop)
                if p < 0:
                    return -2
                if np.int64(k2 >> np.uint64(3)) == 1 and np.int64(k2 & np.uint64(7)) == 0:
                    v, p = _varint(buf, p, stop)
                    size = int(np.int64(v))
                else:
                    p = _skip(buf, p, stop, np.int64(k2 & np.uint64(7)))
                if p < 0:
                    return -2
            numel = numel * size if size >= 0 and numel >= 0 else -1
            pos = stop
        else:
            if field == 3:
                numel = -1  # unknown_rank
            pos = _skip(buf, pos, end, wire)
            if pos < 0:
                return -2
    return numel


@jit
def _tensor(buf: np.ndarray, pos: int, end: int) -> tuple[int, float]:  # pragma: no cover
    """(kind, value) of a ``TensorProto``; kind -1 when malformed."""
    dtype, numel, other = 0, 1, False
    content, content_len = -1, 0
    n_f32, f32_at, n_f64, f64_at = 0, -1, 0, -1
    while pos < end:
        field, wire, pos = _tag(buf, pos, end)
        if pos < 0:
            return -1, np.nan
        if field == 1 and wire == 0:
            v, pos = _varint(buf, pos, end)
            dtype = int(np.int64(v & np.uint64(0x7FFFFFFF)))
        elif wire == 2 and field in (2, 4, 5, 6):
            start, stop = _len(buf, pos, end)
            if start < 0:
                return -1, np.nan
            if field == 2:
                numel = _shape_numel(buf, start, stop)
                if numel == -2:
                    return -1, np.nan
            elif field == 4:
                content, content_len = start, stop - start
            elif field == 5 and (stop - start) % 4 == 0 and stop > start:
                f32_at = start if n_f32 == 0 else f32_at
                n_f32 += (stop - start) // 4
            elif field == 6 and (stop - start) % 8 == 0 and stop > start:
                f64_at = start if n_f64 == 0 else f64_at
                n_f64 += (stop - start) // 8
            elif stop > start:
                other = True
            pos = stop
        elif field == 5 and wire == 5 and pos + 4 <= end:
            f32_at = pos if n_f32 == 0 else f32_at
            n_f32 += 1
            pos += 4
        elif field == 6 and wire == 1 and pos + 8 <= end:
            f64_at = pos if n_f64 == 0 else f64_at
            n_f64 += 1
            pos += 8
        else:
            other = other or field not in (1, 2, 3, 4, 5, 6)
            pos = _skip(buf, pos, end, wire)
            if pos < 0:
                return -1, np.nan
    if numel != 1 or dtype == _DT_STRING:
        return SKIP, np.nan
    if not other and dtype == _DT_FLOAT and n_f64 == 0:
        if n_f32 == 1 and content < 0:
            return TENSOR_F32, f32(buf, f32_at)
        if n_f32 == 0 and content_len == 4:
            return TENSOR_F32, f32(buf, content)
    if not other and dtype == _DT_DOUBLE and n_f32 == 0:
        if n_f64 == 1 and content < 0:
            return TENSOR_F64, f64(buf, f64_at)
        if n_f64 == 0 and content_len == 8:
            return TENSOR_F64, f64(buf, content)
    return PYTHON, np.nan
