"""The event layout real writers produce for one scalar per event, matched byte by byte.

tensorboardX, torch and TF2 write ``Event{wall_time, step, summary{value{tag, payload
[, metadata]}}}`` with one-byte lengths, fields in number order (protobuf's serialisation
order), each length ending exactly where its parent does. Matching that template costs a few
dozen byte compares per record; anything else goes to the generic walker of
:mod:`~proxydiag.ingest.tb_decode`. Self-contained on purpose: numba does not inline calls
between separately cached functions, and this runs once per record.
"""

from __future__ import annotations

import numpy as np

from proxydiag.ingest.tb_crc import jit
from proxydiag.ingest.tb_wire import (
    KIND,
    REC,
    SIMPLE,
    SKIP,
    TAG_LEN,
    TAG_OFF,
    TENSOR_F32,
    TENSOR_F64,
)


@jit
def _fast(buf: np.ndarray, p: int, end: int, r: int, rows: np.ndarray, values: np.ndarray, nv: int, wall: np.ndarray, step: np.ndarray, scratch: np.ndarray, f4: np.ndarray, f8: np.ndarray) -> bool:  # pragma: no cover
    """Match record ``r`` (``buf[p:end]``) against the template; True when it matched and
    value ``nv`` was written (``f4``/``f8``: float views of ``scratch``, made once)."""
    if end - p < 18 or buf[p] != 0x09 or buf[p + 9] != 0x10:
        return False
    v = np.uint64(0)
    q = p + 10
    shift = np.uint64(0)
    while q < p + 20 and buf[q] >= 0x80:
        v |= np.uint64(buf[q] & 0x7F) << shift
        shift += np.uint64(7)
        q += 1
    if q >= p + 20 or q + 8 > end:
        return False
    v |= np.uint64(buf[q]) << shift
    # summary {value {tag ...}}: 2a L 0a L 0a L, one-byte lengths that end with the record
    if buf[q + 1] != 0x2A or buf[q + 2] != end - q - 3 or buf[q + 3] != 0x0A or buf[q + 4] != end - q - 5:
        return False
    if buf[q + 5] != 0x0A or buf[q + 6] >= 0x80:
        return False
    t0 = q + 7
    t1 = t0 + int(np.int64(buf[q + 6]))
    if t1 + 5 > end:
        return False
    kind, width, at, after = SKIP, 0, 0, 0
    if buf[t1] == 0x15:  # simple_value
        kind, width, at, after = SIMPLE, 4, t1 + 1, t1 + 5
    elif buf[t1] == 0x42 and buf[t1 + 1] < 0x80 and buf[t1 + 2] == 0x08 and t1 + 2 + buf[t1 + 1] <= end:
        stop = t1 + 2 + int(np.int64(buf[t1 + 1]))
        dtype = buf[t1 + 3]
        c = t1 + 4
        if c + 2 <= stop and buf[c] == 0x12 and buf[c + 1] == 0x00:  # empty (scalar) shape
            c += 2
        width = 4 if dtype == 1 else 8 if dtype == 2 else 0
        field = buf[c] if c < stop else 0
        if width and c + 2 + width == stop and buf[c + 1] == width and (
            field == 0x22 or (dtype == 1 and field == 0x2A) or (dtype == 2 and field == 0x32)
        ):
            kind, at, after = (TENSOR_F32 if width == 4 else TENSOR_F64), c + 2, stop
    if kind == SKIP:
        return False
    if after != end and not (buf[after] == 0x4A and after + 2 + np.int64(buf[after + 1]) == end and buf[after + 1] < 0x80):
        return False  # only plugin metadata may follow the payload
    for k in range(8):
        scratch[k] = buf[p + 1 + k]
    wall[r] = f8[0]  # f4, f8: float views of scratch, made once (a view per value costs)
    step[r] = np.int64(v)
    for k in range(width):
        scratch[k] = buf[at + k]
    values[nv] = float(f4[0]) if width == 4 else f8[0]
    rows[REC, nv], rows[TAG_OFF, nv], rows[TAG_LEN, nv], rows[KIND, nv] = r, t0, t1 - t0, kind
    return True
