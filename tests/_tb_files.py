"""Helpers for TensorBoard tests: real writers in, TensorBoard's own loader as the oracle."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from tensorboard.backend.event_processing.event_file_loader import EventFileLoader
from tensorboard.compat.proto import event_pb2, summary_pb2, tensor_pb2, types_pb2
from tensorboard.summary.writer.event_file_writer import EventFileWriter
from tensorboard.util import tensor_util

Row = tuple[str, int, float, float]


def loader_rows(path: Path) -> list[Row]:
    """(tag, step, value, wall_time) of every scalar, as TensorBoard's EventFileLoader (with
    its data_compat/dataclass_compat layers) reads them: a tag's first value decides."""
    first: dict[str, summary_pb2.SummaryMetadata] = {}
    rows: list[Row] = []
    for event in EventFileLoader(str(path)).Load():
        for value in event.summary.value:
            md = first.setdefault(value.tag, value.metadata)
            if md.data_class == summary_pb2.DATA_CLASS_SCALAR:
                number = tensor_util.make_ndarray(value.tensor).item()
                rows.append((value.tag, int(event.step), float(number), float(event.wall_time)))
    return rows


def assert_same_rows(got: list[Row], expected: list[Row]) -> None:
    assert [r[0] for r in got] == [r[0] for r in expected]
    for col in (1, 2, 3):
        np.testing.assert_array_equal(
            np.array([r[col] for r in got], dtype=np.float64 if col > 1 else np.int64),
            np.array([r[col] for r in expected], dtype=np.float64 if col > 1 else np.int64),
        )


def tensor_value(
    tag: str, number: float, *, dtype: str, metadata: bool
) -> summary_pb2.Summary.Value:
    """A tensor-form scalar as torch ``new_style`` (float_val/double_val) or tensorboard's
    ``make_tensor_proto`` (half, int) write it, with ``scalars`` plugin metadata or none."""
    if dtype == "float":
        tensor = tensor_pb2.TensorProto(dtype=types_pb2.DT_FLOAT, float_val=[number])
    elif dtype == "double":
        tensor = tensor_pb2.TensorProto(dtype=types_pb2.DT_DOUBLE, double_val=[number])
    else:
        with np.errstate(over="ignore", invalid="ignore"):
            tensor = tensor_util.make_tensor_proto(np.array(number, dtype=dtype))
    md = summary_pb2.SummaryMetadata(
        plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name="scalars")
    )
    return summary_pb2.Summary.Value(tag=tag, tensor=tensor, metadata=md if metadata else None)


def write_tensor_events(
    logdir: Path, rows: list[tuple[str, int, float, float]], *, dtype: str, first_only: bool
) -> Path:
    """Write (tag, step, value, wall) rows as tensor scalars with tensorboard's own writer."""
    writer = EventFileWriter(str(logdir))
    seen: set[str] = set()
    for tag, step, number, wall in rows:
        md = not first_only or tag not in seen
        seen.add(tag)
        summary = summary_pb2.Summary(value=[tensor_value(tag, number, dtype=dtype, metadata=md)])
        writer.add_event(event_pb2.Event(wall_time=wall, step=step, summary=summary))
    writer.close()
    return Path(writer.get_logdir())


def event_file(logdir: Path) -> Path:
    files = sorted(logdir.glob("*tfevents*"))
    assert len(files) == 1, files
    return files[0]
