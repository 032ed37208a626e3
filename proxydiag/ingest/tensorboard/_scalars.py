"""One event file's bytes -> scalar columns (step, tag, value, wall_time) in file order.

The compiled scan (:mod:`~proxydiag.ingest.tensorboard._decode`: framing, CRCs, decoding, tag ids in
one pass) gives every summary value; then, in Python, one protobuf parse per tag decides
which tags are scalars (:func:`~proxydiag.ingest.tensorboard._proto.first_is_scalar` on the tag's
first value), values the decoder leaves to protobuf (half, bfloat16 and integer tensors,
rare) are filled one by one, and a compiled pass drops the other values in place. The
columns are the scan's own arrays: nothing is gathered or copied.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl

from proxydiag.errors import IngestError
from proxydiag.ingest.tensorboard import _proto as tb_proto
from proxydiag.ingest.tensorboard._decode import (
    PY_INDEX,
    PY_LEN,
    PY_START,
    PY_VALUE,
    Decoded,
    decode,
)
from proxydiag.ingest.tensorboard._jit import jit
from proxydiag.ingest.tensorboard._records import describe, frame
from proxydiag.ingest.tensorboard._tags import INDEX, KIND, LEN, OFF, REC_LEN, REC_START
from proxydiag.ingest.tensorboard._wire import SIMPLE, SKIP

_MAX_ISSUES = 20


@dataclass(frozen=True)
class Scalars:
    """Scalar points of one event file, in file order, and what was damaged (one line each).

    A point's tag is ``tag_names[tag_ids[i]]``; every name has points.
    """

    steps: np.ndarray
    tag_ids: np.ndarray
    tag_names: list[str]
    values: np.ndarray
    wall_times: np.ndarray
    issues: list[tuple[str, str]]  # (event kind, message)
    first_wall_time: float

    @property
    def size(self) -> int:
        return int(self.steps.size)

    @property
    def keys(self) -> pl.Series:
        """The tag of every point, as text."""
        return pl.Series("key", self.tag_names, dtype=pl.Utf8).gather(self.tag_ids)


def read_file(file: Path) -> Scalars:
    """Every scalar point of an event file (its bytes are read once, into one array)."""
    try:
        buf = (
            np.fromfile(file, dtype=np.uint8)
            if file.stat().st_size
            else np.empty(0, dtype=np.uint8)
        )
    except OSError as exc:
        raise IngestError(
            f"{file}: cannot read event file ({exc.strerror}); check permissions"
        ) from exc
    return read_buffer(buf, path=str(file))


def read_buffer(buf: np.ndarray, *, path: str) -> Scalars:
    """Every scalar point in ``buf`` (the bytes of one event file named ``path``)."""
    dec = decode(buf)
    issues = _framing_issues(dec, path=path)
    if dec.n_malformed:
        slow = _slow(buf, dec, issues, path=path)
        if slow is not None:
            return slow
    names = [_text(buf, off, length) for off, length in dec.tags[:, [OFF, LEN]].tolist()]
    scalar_tag = np.array(
        [
            kind == SIMPLE
            or tb_proto.first_is_scalar(_record(buf, start, length), index, first_kind=kind)
            for start, length, index, kind in dec.tags[
                :, [REC_START, REC_LEN, INDEX, KIND]
            ].tolist()
        ],
        dtype=np.bool_,
    )
    for i, start, length, index in dec.python[:, [PY_VALUE, PY_START, PY_LEN, PY_INDEX]].tolist():
        if scalar_tag[dec.tag[i]]:  # rare: half, bf16, int tensors
            number = tb_proto.tensor_scalar(_record(buf, start, length), index)
            if number is None:
                dec.kind[i] = SKIP
            else:
                dec.value[i] = number
    used = np.zeros(len(names), dtype=np.bool_)
    n = _keep(scalar_tag, dec.kind, dec.tag, dec.step, dec.wall_time, dec.value, used)
    ids = dec.tag[:n]
    if not used.all():  # tags without points (histograms, images, text): number the rest
        _renumber(ids, np.cumsum(used, dtype=np.int32) - 1)
        names = [name for name, u in zip(names, used.tolist(), strict=True) if u]
    return Scalars(
        dec.step[:n], ids, names, dec.value[:n], dec.wall_time[:n], issues, dec.first_wall_time
    )


@jit
def _keep(
    scalar_tag: np.ndarray,
    kind: np.ndarray,
    tag: np.ndarray,
    step: np.ndarray,
    wall: np.ndarray,
    value: np.ndarray,
    used: np.ndarray,
) -> int:  # pragma: no cover
    """Move the values of scalar tags (not :data:`SKIP`) to the front, in order, flagging
    their tags ``used``; their count."""
    out = 0
    for i in range(kind.size):
        if scalar_tag[tag[i]] and kind[i] != SKIP:
            if out != i:
                step[out], wall[out], value[out], tag[out] = step[i], wall[i], value[i], tag[i]
            used[tag[i]] = True
            out += 1
    return out


@jit
def _renumber(ids: np.ndarray, new: np.ndarray) -> None:  # pragma: no cover
    for i in range(ids.size):
        ids[i] = new[ids[i]]


def _slow(
    buf: np.ndarray, dec: Decoded, issues: list[tuple[str, str]], *, path: str
) -> Scalars | None:
    """Records the compiled walker rejected: protobuf decides. Those it rejects too are skipped
    with a warning; if it reads any of them, the whole file is decoded by protobuf."""
    framing = frame(buf)
    slow = tb_proto.decode_slow(buf, framing.starts, framing.lengths)
    offsets = framing.starts[slow.bad_records] - 12
    issues += [
        (
            "malformed_record",
            f"{path}@{o}: record passed its CRC but is not an Event proto; skipped",
        )
        for o in offsets[:_MAX_ISSUES].tolist()
    ]
    if len(slow.bad_records) == dec.n_malformed:
        return None
    index: dict[str, int] = {}
    ids = np.array([index.setdefault(key, len(index)) for key in slow.keys], dtype=np.int32)
    return Scalars(
        np.asarray(slow.steps, dtype=np.int64),
        ids,
        list(index),
        np.asarray(slow.values, dtype=np.float64),
        np.asarray(slow.wall_times, dtype=np.float64),
        issues,
        dec.first_wall_time,
    )


def _framing_issues(dec: Decoded, *, path: str) -> list[tuple[str, str]]:
    kinds = {1: "crc_error", 2: "crc_error", 3: "truncated"}
    issues = [
        (kinds[int(k)], describe(int(k), int(o), int(d), path=path))
        for k, o, d in dec.problems[:_MAX_ISSUES].tolist()
    ]
    if dec.n_problems > len(issues):
        issues.append(
            ("crc_error", f"{path}: {dec.n_problems - len(issues)} more damaged places not listed")
        )
    return issues


def _record(buf: np.ndarray, start: int, length: int) -> bytes:
    return bytes(buf[start : start + length].tobytes())


def _text(buf: np.ndarray, off: int, length: int) -> str:
    return buf[off : off + length].tobytes().decode("utf-8", errors="replace")
