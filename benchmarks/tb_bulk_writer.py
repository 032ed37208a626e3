"""A fast bulk writer of TensorBoard event files, for benchmark inputs (10^6 points in ~1 s).

Real writers (tensorboardX, torch, tensorboard's ``EventFileWriter``) serialise one proto
per point and take about a minute per million. This writer lays out the same bytes with
numpy: records that share a tag and a step-varint length have one layout, so each such
group is a 2-D byte array filled column-wise and scattered into the file at its offsets.
The layouts are the ones the real writers produce (protobuf serialises fields in number
order): ``simple_value`` (tensorboardX / torch ``add_scalar``), or a scalar tensor with
``float_val`` (torch ``new_style=True``) or ``double_val`` (``double_precision=True``) and
``scalars`` plugin metadata on every event (torch) or only the first of a tag (TF2).
``tests/ingest/tensorboard/test_tensorboard_writer.py`` checks the output against TensorBoard's
own loader.
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Literal

import numba
import numpy as np

from proxydiag.ingest.tensorboard.crc import TABLES, masked, masked_crc32c

Form = Literal["simple", "tensor_f32", "tensor_f64"]
_PLUGIN = b"\x0a\x09\x0a\x07scalars"  # SummaryMetadata{plugin_data{plugin_name="scalars"}}


def _varint(n: int) -> bytes:
    out = bytearray()
    n &= (1 << 64) - 1
    while True:
        low, n = n & 0x7F, n >> 7
        out.append(low | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _record(data: bytes) -> bytes:
    head = struct.pack("<Q", len(data))
    return head + struct.pack("<I", masked(head)) + data + struct.pack("<I", masked(data))


@numba.njit(cache=False)
def _fill_crcs(out: np.ndarray, starts: np.ndarray, lengths: np.ndarray, table: np.ndarray) -> None:
    for i in range(starts.size):
        s, n = starts[i], lengths[i]
        for k in range(8):
            out[s + k] = (n >> (8 * k)) & 0xFF
        c = masked_crc32c(out, s, 8, table)
        for k in range(4):
            out[s + 8 + k] = (c >> (8 * k)) & 0xFF
        c = masked_crc32c(out, s + 12, n, table)
        for k in range(4):
            out[s + 12 + n + k] = (c >> (8 * k)) & 0xFF


def _payload(form: Form, with_md: bool) -> tuple[bytes, bytes, int]:
    """(bytes before the number, bytes after it, number width) inside a Summary.Value."""
    if form == "simple":
        return b"\x15", b"", 4
    tensor_head = b"\x08\x01\x2a\x04" if form == "tensor_f32" else b"\x08\x02\x32\x08"
    width = 4 if form == "tensor_f32" else 8
    tail = b"\x4a" + _varint(len(_PLUGIN)) + _PLUGIN if with_md else b""
    return b"\x42" + _varint(len(tensor_head) + width) + tensor_head, tail, width


def write_scalars(
    path: str | Path,
    *,
    tags: list[str],
    steps: np.ndarray,
    values: np.ndarray,
    wall_times: np.ndarray,
    form: Form = "simple",
    metadata: Literal["every", "first"] = "every",
) -> Path:
    """Write ``values[i, j]`` (step ``steps[i]``, tag ``tags[j]``) step-major, as real loggers
    do."""
    path = Path(path)
    n_steps, n_tags = values.shape
    dtype = "<f4" if form != "tensor_f64" else "<f8"
    vlen = np.array([len(_varint(int(s))) for s in steps], dtype=np.int64)
    has_md = np.full(n_steps, form != "simple" and metadata == "every")
    has_md[0] = form != "simple"
    groups, lengths = [], np.zeros((n_steps, n_tags), dtype=np.int64)
    for j, tag in enumerate(tags):
        for md in (True, False):
            before, after, width = _payload(form, md)
            value = b"\x0a" + _varint(len(tag.encode())) + tag.encode() + before
            for vl in np.unique(vlen).tolist():
                rows = np.flatnonzero((vlen == vl) & (has_md == md))
                if rows.size == 0:
                    continue
                vbytes = len(value) + width + len(after)
                summary = b"\x0a" + _varint(vbytes)
                event_len = (
                    9 + 1 + vl + 1 + len(_varint(len(summary) + vbytes)) + len(summary) + vbytes
                )
                lengths[rows, j] = event_len
                groups.append((rows, j, vl, summary, value, after, width, event_len))
    sizes = lengths.reshape(-1) + 16
    offsets = np.concatenate(([0], np.cumsum(sizes)[:-1]))
    head = _record(b"\x09" + struct.pack("<d", float(wall_times[0])) + b"\x1a\x0dbrain.Event:2")
    out = np.zeros(len(head) + int(sizes.sum()), dtype=np.uint8)
    out[: len(head)] = np.frombuffer(head, dtype=np.uint8)
    for rows, j, vl, summary, value, after, width, event_len in groups:
        mat = np.zeros((rows.size, event_len), dtype=np.uint8)
        mat[:, 0] = 0x09
        mat[:, 1:9] = wall_times[rows].astype("<f8").view(np.uint8).reshape(-1, 8)
        mat[:, 9] = 0x10
        step_bytes = steps[rows].astype(np.uint64)
        for k in range(vl):
            mat[:, 10 + k] = ((step_bytes >> np.uint64(7 * k)) & np.uint64(0x7F)) | (
                0x80 if k < vl - 1 else 0
            )
        pos = 10 + vl
        rest = b"\x2a" + _varint(len(summary) + len(value) + width + len(after)) + summary + value
        mat[:, pos : pos + len(rest)] = np.frombuffer(rest, dtype=np.uint8)
        pos += len(rest)
        mat[:, pos : pos + width] = values[rows, j].astype(dtype).view(np.uint8).reshape(-1, width)
        mat[:, pos + width :] = np.frombuffer(after, dtype=np.uint8)
        at = len(head) + offsets[rows * n_tags + j] + 12
        out[at[:, None] + np.arange(event_len)] = mat
    _fill_crcs(out, len(head) + offsets, lengths.reshape(-1), TABLES)
    out.tofile(path)
    return path
