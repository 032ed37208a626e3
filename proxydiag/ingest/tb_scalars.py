"""One event file's bytes -> scalar columns (step, key, value, wall_time) in file order.

Framing and CRCs (:mod:`~proxydiag.ingest.tb_records`), the compiled decoder
(:mod:`~proxydiag.ingest.tb_decode`), tag interning (:mod:`~proxydiag.ingest.tb_tags`),
then numpy: which tags are scalars (:func:`~proxydiag.ingest.tb_proto.is_scalar_tag` on the
first value of each tag) and a gather per column. Values the decoder leaves to protobuf
(half, bfloat16 and integer tensors) are filled one by one; they are rare.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import polars as pl

from proxydiag.ingest import tb_proto
from proxydiag.ingest.tb_decode import (
    KIND,
    REC,
    TAG_LEN,
    TAG_OFF,
    decode,
)
from proxydiag.ingest.tb_records import Framing, describe, frame
from proxydiag.ingest.tb_tags import intern
from proxydiag.ingest.tb_wire import PYTHON, SKIP

_MAX_ISSUES = 20


@dataclass(frozen=True)
class Scalars:
    """Scalar points of one event file, in file order, and what was damaged (one line each)."""

    steps: np.ndarray
    keys: pl.Series
    values: np.ndarray
    wall_times: np.ndarray
    issues: list[tuple[str, str]]  # (event kind, message)
    first_wall_time: float

    @property
    def size(self) -> int:
        return int(self.steps.size)


def read_buffer(buf: np.ndarray, *, path: str) -> Scalars:
    """Every scalar point in ``buf`` (the bytes of one event file named ``path``)."""
    framing = frame(buf)
    issues = _framing_issues(framing, path=path)
    decoded = decode(buf, framing.starts, framing.lengths)
    first_wall = float(decoded.wall_time[0]) if decoded.wall_time.size else float("inf")
    bad = np.flatnonzero(decoded.malformed)
    if bad.size:
        slow = tb_proto.decode_slow(buf, framing.starts, framing.lengths)
        offsets = framing.starts[slow.bad_records] - 12
        issues += [
            ("malformed_record", f"{path}@{o}: record passed its CRC but is not an Event proto; skipped")
            for o in offsets[:_MAX_ISSUES].tolist()
        ]
        if len(slow.bad_records) < bad.size:  # protobuf read what the fast walker could not
            return Scalars(
                np.asarray(slow.steps, dtype=np.int64), pl.Series("key", slow.keys, dtype=pl.Utf8),
                np.asarray(slow.values, dtype=np.float64), np.asarray(slow.wall_times, dtype=np.float64),
                issues, first_wall,
            )
    rows, values = decoded.rows, decoded.values
    if rows.shape[0] == 0:
        return _empty(issues, first_wall)
    ids, first = intern(buf, rows[:, TAG_OFF], rows[:, TAG_LEN])
    names = [_text(buf, rows[r, TAG_OFF], rows[r, TAG_LEN]) for r in first.tolist()]
    kind, index = rows[:, KIND] & 7, rows[:, KIND] >> 3
    record = _record_reader(buf, framing, rows)
    scalar_tag = np.array(
        [tb_proto.first_is_scalar(record(r), int(index[r]), first_kind=int(kind[r])) for r in first.tolist()],
        dtype=bool,
    )
    keep = scalar_tag[ids] & (kind != SKIP)
    for i in np.flatnonzero(keep & (kind == PYTHON)).tolist():  # rare: half, bf16, int tensors
        number = tb_proto.tensor_scalar(record(i), int(index[i]))
        keep[i], values[i] = number is not None, np.nan if number is None else number
    rec = rows[keep, REC]
    keys = pl.Series("key", names, dtype=pl.Utf8).gather(ids[keep])
    return Scalars(decoded.step[rec], keys, values[keep], decoded.wall_time[rec], issues, first_wall)


def _framing_issues(framing: Framing, *, path: str) -> list[tuple[str, str]]:
    kinds = {1: "crc_error", 2: "crc_error", 3: "truncated"}
    issues = [
        (kinds[int(k)], describe(int(k), int(o), int(d), path=path))
        for k, o, d in framing.problems[:_MAX_ISSUES].tolist()
    ]
    if framing.n_problems > len(issues):
        issues.append(("crc_error", f"{path}: {framing.n_problems - len(issues)} more damaged places not listed"))
    return issues


def _record_reader(buf: np.ndarray, framing: Framing, rows: np.ndarray) -> Callable[[int], bytes]:
    def record(row: int) -> bytes:
        start, length = framing.starts[rows[row, REC]], framing.lengths[rows[row, REC]]
        return bytes(buf[start : start + length].tobytes())

    return record


def _text(buf: np.ndarray, off: int, length: int) -> str:
    return buf[off : off + length].tobytes().decode("utf-8", errors="replace")


def _empty(issues: list[tuple[str, str]], first_wall: float) -> Scalars:
    return Scalars(
        np.empty(0, dtype=np.int64), pl.Series("key", [], dtype=pl.Utf8),
        np.empty(0, dtype=np.float64), np.empty(0, dtype=np.float64), issues, first_wall,
    )
