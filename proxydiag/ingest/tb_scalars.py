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
from pathlib import Path

import numpy as np
import polars as pl

from proxydiag.errors import IngestError
from proxydiag.ingest import tb_proto
from proxydiag.ingest.tb_decode import Decoded, decode
from proxydiag.ingest.tb_records import Framing, describe, frame
from proxydiag.ingest.tb_tags import intern
from proxydiag.ingest.tb_wire import KIND, PYTHON, REC, SKIP, TAG_LEN, TAG_OFF

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
    return _gather(_select(buf, path=path))


def read_file(file: Path) -> Scalars:
    """Every scalar point of an event file; its bytes are released before the columns are
    gathered (the file is often larger than the points it holds)."""
    try:
        buf = np.fromfile(file, dtype=np.uint8) if file.stat().st_size else np.empty(0, dtype=np.uint8)
    except OSError as exc:
        raise IngestError(f"{file}: cannot read event file ({exc.strerror}); check permissions") from exc
    selected = _select(buf, path=str(file))
    del buf
    return _gather(selected)


@dataclass(frozen=True)
class _Selected:
    scalars: Scalars | None  # set when protobuf decoded the whole file
    decoded: Decoded
    ids: np.ndarray
    keep: np.ndarray
    names: list[str]
    issues: list[tuple[str, str]]
    first_wall: float


def _select(buf: np.ndarray, *, path: str) -> _Selected:
    """Frame, decode and pick the scalar values (everything that needs the file's bytes)."""
    framing = frame(buf)
    issues = _framing_issues(framing, path=path)
    decoded = decode(buf, framing.starts, framing.lengths)
    first_wall = float(decoded.wall_time[0]) if decoded.wall_time.size else float("inf")
    nothing = np.empty(0, dtype=np.int64)
    if decoded.malformed.any():
        slow = _slow(buf, framing, decoded, issues, path=path, first_wall=first_wall)
        if slow is not None:
            return _Selected(slow, decoded, nothing, nothing.astype(bool), [], issues, first_wall)
    rows, values = decoded.rows, decoded.values
    if rows.shape[1] == 0:
        return _Selected(None, decoded, nothing, nothing.astype(bool), [], issues, first_wall)
    ids, first = intern(buf, rows[TAG_OFF], rows[TAG_LEN])
    names = [_text(buf, rows[TAG_OFF, r], rows[TAG_LEN, r]) for r in first.tolist()]
    kind = rows[KIND] & 7
    record = _record_reader(buf, framing, rows)
    scalar_tag = np.array(
        [tb_proto.first_is_scalar(record(r), int(rows[KIND, r] >> 3), first_kind=int(kind[r])) for r in first.tolist()],
        dtype=bool,
    )
    keep = scalar_tag[ids] & (kind != SKIP)
    for i in np.flatnonzero(keep & (kind == PYTHON)).tolist():  # rare: half, bf16, int tensors
        number = tb_proto.tensor_scalar(record(i), int(rows[KIND, i] >> 3))
        keep[i], values[i] = number is not None, np.nan if number is None else number
    return _Selected(None, decoded, ids, keep, names, issues, first_wall)


def _gather(sel: _Selected) -> Scalars:
    if sel.scalars is not None:
        return sel.scalars
    if not sel.keep.any():
        return _empty(sel.issues, sel.first_wall)
    dec = sel.decoded
    rec = dec.rows[REC][sel.keep]
    keys = pl.Series("key", sel.names, dtype=pl.Utf8).gather(sel.ids[sel.keep])
    return Scalars(dec.step[rec], keys, dec.values[sel.keep], dec.wall_time[rec], sel.issues, sel.first_wall)


def _slow(
    buf: np.ndarray, framing: Framing, decoded: Decoded, issues: list[tuple[str, str]], *,
    path: str, first_wall: float,
) -> Scalars | None:
    """Records the fast walker rejected: protobuf decides. Those it rejects too are skipped
    with a warning; if it reads any of them, the whole file is decoded by protobuf."""
    slow = tb_proto.decode_slow(buf, framing.starts, framing.lengths)
    offsets = framing.starts[slow.bad_records] - 12
    issues += [
        ("malformed_record", f"{path}@{o}: record passed its CRC but is not an Event proto; skipped")
        for o in offsets[:_MAX_ISSUES].tolist()
    ]
    if len(slow.bad_records) == int(decoded.malformed.sum()):
        return None
    return Scalars(
        np.asarray(slow.steps, dtype=np.int64), pl.Series("key", slow.keys, dtype=pl.Utf8),
        np.asarray(slow.values, dtype=np.float64), np.asarray(slow.wall_times, dtype=np.float64),
        issues, first_wall,
    )


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
        start, length = framing.starts[rows[REC, row]], framing.lengths[rows[REC, row]]
        return bytes(buf[start : start + length].tobytes())

    return record


def _text(buf: np.ndarray, off: int, length: int) -> str:
    return buf[off : off + length].tobytes().decode("utf-8", errors="replace")


def _empty(issues: list[tuple[str, str]], first_wall: float) -> Scalars:
    return Scalars(
        np.empty(0, dtype=np.int64), pl.Series("key", [], dtype=pl.Utf8),
        np.empty(0, dtype=np.float64), np.empty(0, dtype=np.float64), issues, first_wall,
    )
