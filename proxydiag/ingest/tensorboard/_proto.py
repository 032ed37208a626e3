"""The protobuf route: values the compiled decoder leaves to protobuf, and a whole-file
reference decoder with the same rules (used when a record walks badly, and by tests).

Which values are scalars follows TensorBoard's read path (``data_compat`` then
``dataclass_compat``): a tag's *first* value decides. ``simple_value`` makes it a scalar;
otherwise its metadata must have ``data_class`` SCALAR or plugin ``scalars``. Later values
of a scalar tag count when they hold ``simple_value`` or a one-element numeric tensor.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from proxydiag.ingest.tensorboard._wire import SIMPLE, SKIP

_SCALAR_CLASS = 1
SCALARS_PLUGIN = "scalars"


def is_scalar_tag(*, first_kind: int, data_class: int, plugin: str) -> bool:
    """Whether a tag holds scalars, from its first value (``data_class`` -1: no metadata).

    >>> is_scalar_tag(first_kind=2, data_class=0, plugin="scalars")
    True
    >>> is_scalar_tag(first_kind=2, data_class=-1, plugin="")
    False
    """
    if first_kind == SIMPLE:
        return True
    return data_class == _SCALAR_CLASS or (data_class == 0 and plugin == SCALARS_PLUGIN)


def first_is_scalar(record: bytes, index: int, *, first_kind: int) -> bool:
    """:func:`is_scalar_tag` for the tag of value ``index`` of an Event record (its first)."""
    from tensorboard.compat.proto import event_pb2

    value = event_pb2.Event.FromString(record).summary.value[index]
    md = value.metadata
    data_class = int(md.data_class) if value.HasField("metadata") else -1
    return is_scalar_tag(
        first_kind=first_kind, data_class=data_class, plugin=md.plugin_data.plugin_name
    )


def tensor_scalar(record: bytes, index: int) -> float | None:
    """The value of summary value ``index`` of an Event record, via protobuf (None when it
    is not a one-element numeric tensor)."""
    from tensorboard.compat.proto import event_pb2

    return value_number(event_pb2.Event.FromString(record).summary.value[index])


def value_number(value: Any) -> float | None:
    """The number in a ``Summary.Value`` (None unless ``simple_value`` or a one-element
    numeric tensor)."""
    from tensorboard.util import tensor_util

    if value.WhichOneof("value") == "simple_value":
        return float(value.simple_value)
    try:
        arr = tensor_util.make_ndarray(value.tensor)
    except (TypeError, ValueError):
        return None
    if arr.size != 1 or arr.dtype.kind not in "fiub":
        return None
    return float(arr.reshape(-1)[0])


@dataclass
class SlowRows:
    """Scalar rows decoded by protobuf, in file order."""

    steps: list[int] = field(default_factory=list)
    keys: list[str] = field(default_factory=list)
    values: list[float] = field(default_factory=list)
    wall_times: list[float] = field(default_factory=list)
    bad_records: list[int] = field(default_factory=list)


def decode_slow(buf: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> SlowRows:
    """Decode every record with protobuf (a record protobuf rejects goes to ``bad_records``)."""
    from google.protobuf.message import DecodeError
    from tensorboard.compat.proto import event_pb2

    out = SlowRows()
    scalar: dict[str, bool] = {}
    for rec, (start, length) in enumerate(zip(starts.tolist(), lengths.tolist(), strict=True)):
        data = buf[start : start + length].tobytes()
        try:
            event = event_pb2.Event.FromString(data)
        except DecodeError:
            out.bad_records.append(rec)
            continue
        for value in event.summary.value:
            kind = value.WhichOneof("value")
            if value.tag not in scalar:
                md = value.metadata
                scalar[value.tag] = is_scalar_tag(
                    first_kind=SIMPLE if kind == "simple_value" else SKIP,
                    data_class=int(md.data_class) if value.HasField("metadata") else -1,
                    plugin=md.plugin_data.plugin_name,
                )
            if not scalar[value.tag] or kind not in ("simple_value", "tensor"):
                continue
            number = value_number(value)
            if number is None:
                continue
            out.steps.append(event.step)
            out.keys.append(value.tag)
            out.values.append(number)
            out.wall_times.append(event.wall_time)
    return out
