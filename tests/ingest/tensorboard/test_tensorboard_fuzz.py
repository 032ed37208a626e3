"""Property and fuzz tests of the binary TensorBoard reader (bounded: a few seconds).

Random bytes, random cuts and random byte flips of real event files must never raise
anything but IngestError/IngestWarning, never hang, and never yield a point that was not
in the file: every record the reader keeps passed its CRC. Valid random events must decode
exactly as protobuf decodes them. Inputs that once broke the reader live in
``tests/regressions/tensorboard/`` and are replayed here.
"""

from __future__ import annotations

import math
import os
import warnings

import google_crc32c
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tensorboard.compat.proto import event_pb2, summary_pb2

from proxydiag.ingest.tensorboard import crc as tb_crc
from proxydiag.ingest.tensorboard._jit import jit
from proxydiag.ingest.tensorboard._proto import decode_slow
from proxydiag.ingest.tensorboard._records import frame
from proxydiag.ingest.tensorboard._scalars import Scalars, read_buffer
from proxydiag.ingest.tensorboard.crc import masked
from tests._paths import TESTS
from tests._tb_files import tensor_value

REGRESSIONS = TESTS / "regressions" / "tensorboard"
#: PROXYDIAG_FUZZ_EXAMPLES=5000 runs a longer campaign (CI: 150 per target, a few seconds)
EXAMPLES = int(os.environ.get("PROXYDIAG_FUZZ_EXAMPLES", "150"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
pytestmark = pytest.mark.timeout(
    max(120, EXAMPLES)
)  # a hang fails instead of waiting for the suite


def _record(data: bytes) -> bytes:
    head = len(data).to_bytes(8, "little")
    return head + masked(head).to_bytes(4, "little") + data + masked(data).to_bytes(4, "little")


def _read(data: bytes) -> Scalars:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return read_buffer(np.frombuffer(data, dtype=np.uint8), path="fuzz")


def _points(sc: Scalars) -> set[tuple[str, int, str]]:
    return set(
        zip(
            sc.keys.to_list(), sc.steps.tolist(), [repr(v) for v in sc.values.tolist()], strict=True
        )
    )


_numbers = st.floats(allow_nan=True, allow_infinity=True)
_tags = st.text(min_size=0, max_size=40)


@st.composite
def events(draw: st.DrawFn) -> bytes:
    """A valid Event: simple_value or tensor scalars (with or without metadata), several
    values per summary (TF1 merged summaries), or no summary at all."""
    values = []
    for _ in range(draw(st.integers(0, 3))):
        tag, number = draw(_tags), draw(_numbers)
        form = draw(st.sampled_from(["simple", "float", "double", "float16", "int32", "image"]))
        if form == "simple":
            values.append(summary_pb2.Summary.Value(tag=tag, simple_value=number))
        elif form == "image":
            values.append(
                summary_pb2.Summary.Value(tag=tag, image=summary_pb2.Summary.Image(height=1))
            )
        else:
            if form == "int32":
                number = (
                    0.0 if not math.isfinite(number) else float(np.clip(number, -1e9, 1e9) // 1)
                )
            values.append(tensor_value(tag, number, dtype=form, metadata=draw(st.booleans())))
    event = event_pb2.Event(
        wall_time=draw(st.floats(allow_nan=False)), step=draw(st.integers(-(2**63), 2**63 - 1))
    )
    if values:
        event.summary.value.extend(values)
    return bytes(event.SerializeToString())


@FUZZ
@given(st.lists(events(), max_size=12))
def test_fast_decoder_equals_protobuf(records: list[bytes]) -> None:
    with np.errstate(all="ignore"):
        data = b"".join(_record(r) for r in records)
    buf = np.frombuffer(data, dtype=np.uint8)
    sc = _read(data)
    framing = frame(buf)
    slow = decode_slow(buf, framing.starts, framing.lengths)
    assert not sc.issues and not slow.bad_records
    assert sc.keys.to_list() == slow.keys
    assert sc.steps.tolist() == slow.steps
    np.testing.assert_array_equal(sc.values, np.array(slow.values, dtype=np.float64))
    np.testing.assert_array_equal(sc.wall_times, np.array(slow.wall_times, dtype=np.float64))


def test_every_table_grows_and_still_equals_protobuf() -> None:
    """Past the scan's first sizes: 300 tags, a Summary of 400 values, 40 int tensors."""
    values = [summary_pb2.Summary.Value(tag=f"t{i}", simple_value=float(i)) for i in range(300)]
    big = [summary_pb2.Summary.Value(tag="", simple_value=float(i)) for i in range(400)]
    ints = [tensor_value("n", float(i), dtype="int32", metadata=True) for i in range(40)]
    records = [
        event_pb2.Event(
            step=s, wall_time=float(s), summary=summary_pb2.Summary(value=group)
        ).SerializeToString()
        for s, group in enumerate(
            [values[:150], big, *[[v] for v in values[150:]], *[[v] for v in ints]]
        )
    ]
    data = b"".join(_record(r) for r in records)
    buf = np.frombuffer(data, dtype=np.uint8)
    sc = _read(data)
    framing = frame(buf)
    slow = decode_slow(buf, framing.starts, framing.lengths)
    assert sc.size == len(slow.values) == 740
    assert sc.keys.to_list() == slow.keys
    assert sc.steps.tolist() == slow.steps
    np.testing.assert_array_equal(sc.values, np.array(slow.values, dtype=np.float64))


@FUZZ
@given(st.binary(max_size=200), st.integers(0, 16))
def test_crc_instruction_equals_tables(data: bytes, start: int) -> None:
    buf = np.frombuffer(bytes(start) + data, dtype=np.uint8)
    expected = google_crc32c.value(data)
    expected = ((((expected >> 15) | (expected << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF
    assert masked(data) == expected
    assert _crc_tables(buf, start, len(data)) == expected
    if tb_crc.has_crc_instruction():
        assert _crc_instruction(buf, start, len(data)) == expected


@jit
def _crc_tables(buf: np.ndarray, start: int, length: int) -> int:
    return int(tb_crc.crc32c_tables(buf, start, length))


@jit
def _crc_instruction(buf: np.ndarray, start: int, length: int) -> int:
    return int(tb_crc.crc32c_instruction(buf, start, length))


@FUZZ
@given(st.binary(max_size=400))
def test_random_bytes_never_crash(data: bytes) -> None:
    sc = _read(data)
    assert sc.size == 0 or all(isinstance(k, str) for k in sc.keys.to_list())


def _valid_file(n: int = 12) -> bytes:
    out = b""
    for i in range(n):
        value = summary_pb2.Summary.Value(tag=f"m{i % 3}", simple_value=float(i))
        event = event_pb2.Event(
            wall_time=1.0 + i, step=i + 1, summary=summary_pb2.Summary(value=[value])
        )
        out += _record(event.SerializeToString())
    return out


VALID = _valid_file()
ALL_POINTS = _points(_read(VALID))


@FUZZ
@given(
    cut=st.integers(0, len(VALID)),
    flips=st.lists(st.tuples(st.integers(0, len(VALID) - 1), st.integers(1, 255)), max_size=4),
    junk=st.tuples(st.integers(0, len(VALID)), st.binary(max_size=30)),
)
def test_damaged_files_keep_only_intact_points(
    cut: int, flips: list[tuple[int, int]], junk: tuple[int, bytes]
) -> None:
    data = bytearray(VALID)
    for at, mask in flips:
        data[at] ^= mask
    data[junk[0] : junk[0]] = junk[1]
    damaged = bytes(data[:cut])
    sc = _read(damaged)
    assert _points(sc) <= ALL_POINTS  # nothing invented, nothing altered
    if not flips and not junk[1]:
        assert sc.size == sum(1 for r in range(12) if (r + 1) * (len(VALID) // 12) <= cut)


#: regression input -> (points kept, kinds of the warnings)
EXPECTED = {
    "crc-valid-not-a-proto.bin": (0, ["malformed_record"] * 3),
    "huge-length-valid-crc.bin": (0, ["truncated"]),
    "odd-tensor.bin": (0, ["malformed_record"]),
}


def test_regression_inputs_replay() -> None:
    assert sorted(p.name for p in REGRESSIONS.glob("*.bin")) == sorted(EXPECTED)
    for name, (points, kinds) in EXPECTED.items():
        sc = _read((REGRESSIONS / name).read_bytes())
        assert (sc.size, [kind for kind, _ in sc.issues]) == (points, kinds), name


@pytest.mark.parametrize("size", [0, 1, 11, 12, 15])
def test_tiny_inputs(size: int) -> None:
    assert _read(VALID[:size]).size == 0
