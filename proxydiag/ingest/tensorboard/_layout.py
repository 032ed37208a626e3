"""The event layout real writers produce for one scalar per event, matched byte by byte.

tensorboardX, torch and TF2 write ``Event{wall_time, step, summary{value{tag, payload
[, metadata]}}}`` with one-byte lengths, fields in number order (protobuf's serialisation
order), each length ending exactly where its parent does. Matching that template costs a few
dozen byte compares per record; anything else goes to the generic walker of
:mod:`~proxydiag.ingest.tensorboard._decode`.
"""

from __future__ import annotations

import numpy as np

from proxydiag.ingest.tensorboard._jit import at, inlined
from proxydiag.ingest.tensorboard._wire import (
    NO_MATCH,
    SIMPLE,
    SKIP,
    TENSOR_F32,
    TENSOR_F64,
    f32,
    f64,
)


@inlined
def match(
    buf: np.ndarray, p: int, end: int
) -> tuple[int, int, int, np.int64, float, float]:  # pragma: no cover
    """``(kind, tag start, tag length, step, wall_time, value)`` of the record ``buf[p:end]``
    if it has the template's layout, else kind
    :data:`~proxydiag.ingest.tensorboard._wire.NO_MATCH`."""
    if end - p < 18 or at(buf, p) != 0x09 or at(buf, p + 9) != 0x10:
        return NO_MATCH, 0, 0, np.int64(0), 0.0, 0.0
    v = np.uint64(0)
    q = p + 10
    shift = np.uint64(0)
    while q < p + 20 and at(buf, q) >= 0x80:
        v |= np.uint64(at(buf, q) & 0x7F) << shift
        shift += np.uint64(7)
        q += 1
    if q >= p + 20 or q + 8 > end:
        return NO_MATCH, 0, 0, np.int64(0), 0.0, 0.0
    v |= np.uint64(at(buf, q)) << shift
    # summary {value {tag ...}}: 2a L 0a L 0a L, one-byte lengths that end with the record
    if (
        at(buf, q + 1) != 0x2A
        or at(buf, q + 2) != end - q - 3
        or at(buf, q + 3) != 0x0A
        or at(buf, q + 4) != end - q - 5
    ):
        return NO_MATCH, 0, 0, np.int64(0), 0.0, 0.0
    if at(buf, q + 5) != 0x0A or at(buf, q + 6) >= 0x80:
        return NO_MATCH, 0, 0, np.int64(0), 0.0, 0.0
    t0 = q + 7
    t1 = t0 + int(np.int64(at(buf, q + 6)))
    if t1 + 5 > end:
        return NO_MATCH, 0, 0, np.int64(0), 0.0, 0.0
    kind, payload, after = SKIP, 0, 0
    if at(buf, t1) == 0x15:  # simple_value
        kind, payload, after = SIMPLE, t1 + 1, t1 + 5
    elif (
        at(buf, t1) == 0x42
        and at(buf, t1 + 1) < 0x80
        and at(buf, t1 + 2) == 0x08
        and t1 + 2 + at(buf, t1 + 1) <= end
    ):
        stop = t1 + 2 + int(np.int64(at(buf, t1 + 1)))
        dtype = at(buf, t1 + 3)
        c = t1 + 4
        if c + 2 <= stop and at(buf, c) == 0x12 and at(buf, c + 1) == 0x00:  # empty (scalar) shape
            c += 2
        width = 4 if dtype == 1 else 8 if dtype == 2 else 0
        field = at(buf, c) if c < stop else 0
        if (
            width
            and c + 2 + width == stop
            and at(buf, c + 1) == width
            and (field == 0x22 or (dtype == 1 and field == 0x2A) or (dtype == 2 and field == 0x32))
        ):
            kind, payload, after = (TENSOR_F32 if width == 4 else TENSOR_F64), c + 2, stop
    if kind == SKIP:
        return NO_MATCH, 0, 0, np.int64(0), 0.0, 0.0
    if after != end and not (
        at(buf, after) == 0x4A
        and after + 2 + np.int64(at(buf, after + 1)) == end
        and at(buf, after + 1) < 0x80
    ):
        return NO_MATCH, 0, 0, np.int64(0), 0.0, 0.0  # only plugin metadata may follow the payload
    value = f64(buf, payload) if kind == TENSOR_F64 else f32(buf, payload)
    return kind, t0, t1 - t0, np.int64(v), float(f64(buf, p + 1)), float(value)
