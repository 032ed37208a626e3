"""TensorBoard event files: one legacy ``simple_value`` scalar event per logged value.

Records are framed here (length, masked CRC32C, payload, masked CRC32C) with the native
``google_crc32c``, because TensorBoard's TF-free ``RecordWriter`` computes the CRC in pure
Python (~14 s per 10^6 records); the bytes are identical to ``RecordWriter``'s (a test
checks it). Event payloads are TensorBoard's own protobufs. The file name is deterministic
(``events.out.tfevents.<start>.synth.<seed>.0``), not host/pid/time as a live writer's.
"""

from __future__ import annotations

import struct
from pathlib import Path

import google_crc32c
from tensorboard.compat.proto.event_pb2 import Event
from tensorboard.compat.proto.summary_pb2 import Summary

from proxydiag.synth.sim import SynthRun
from proxydiag.synth.view import logged_rows


def masked_crc(data: bytes) -> int:
    """TFRecord's masked CRC32C of ``data``.

    >>> masked_crc(b"")
    2726488792
    """
    crc = int(google_crc32c.value(data))
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def frame_record(data: bytes) -> bytes:
    """One TFRecord: 8-byte length, its masked CRC, the payload, the payload's masked CRC."""
    header = struct.pack("<Q", len(data))
    return (
        header + struct.pack("<I", masked_crc(header)) + data + struct.pack("<I", masked_crc(data))
    )


def write(run_dir: Path, sr: SynthRun, *, naming: str, log_interval: int) -> Path:
    """Write ``sr`` as one event file in ``run_dir``; return the file."""
    rows = logged_rows(sr, naming=naming, fmt="tensorboard", log_interval=log_interval)
    start = float(sr.wall_time[0])
    path = run_dir / f"events.out.tfevents.{int(start)}.synth.{sr.seed}.0"
    chunks = [
        frame_record(Event(wall_time=start, file_version="brain.Event:2").SerializeToString())
    ]
    for step, key, value, wall in rows.iter_rows():
        event = Event(
            wall_time=wall,
            step=step,
            summary=Summary(value=[Summary.Value(tag=key, simple_value=value)]),
        )
        chunks.append(frame_record(event.SerializeToString()))
    path.write_bytes(b"".join(chunks))
    return path
