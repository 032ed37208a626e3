"""A raw frame's keys as small integer codes: what :func:`~proxydiag.ingest.build.build_run`
groups, sorts and maps on, instead of hashing a string per row.

A reader that already numbers its keys (TensorBoard's tag table) hands them over as a polars
``Enum`` column (:func:`enum_keys`), and the codes are free. A ``Utf8`` column is read in runs of
equal keys: a wide table unpivoted column by column, or a log that prints one metric per line
block, has a few runs per key and costs one comparison per row; only a column where keys
change on most rows is hashed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl

from proxydiag.errors import FrameError

#: at most one run of equal keys per this many rows, or the column is hashed instead
_ROWS_PER_RUN = 4


@dataclass(frozen=True)
class Codes:
    """``names[codes[i]]`` is row ``i``'s key."""

    codes: np.ndarray
    names: list[str]


def enum_keys(ids: np.ndarray, names: Sequence[str]) -> pl.Series:
    """A ``key`` column from integer ids into ``names`` (distinct), without building strings.

    >>> enum_keys(np.array([1, 0, 1]), ["loss", "lr"]).cast(pl.Utf8).to_list()
    ['lr', 'loss', 'lr']
    """
    dtype = pl.Enum(list(names))
    physical = pl.Series(dtype=dtype).to_physical().dtype  # UInt8, UInt16 or UInt32 by size
    return pl.Series("key", ids).cast(physical).cat.to(dtype)


def of(keys: pl.Series) -> Codes:
    """The codes of a ``key`` column (``Utf8`` or ``Enum``); names in order of first appearance
    for text, in category order for an ``Enum``.

    >>> c = of(pl.Series(["b", "b", "a", "b"]))
    >>> c.codes.tolist(), c.names
    ([0, 0, 1, 0], ['b', 'a'])
    """
    if keys.null_count():
        raise FrameError("the raw frame has rows without a key")
    if isinstance(keys.dtype, pl.Enum):
        return Codes(keys.to_physical().to_numpy(), keys.dtype.categories.to_list())
    if keys.len() == 0:
        return Codes(np.zeros(0, dtype=np.uint32), [])
    starts = (keys != keys.shift(1)).fill_null(True).arg_true().to_numpy()
    if len(starts) * _ROWS_PER_RUN <= keys.len():
        index: dict[str, int] = {}
        run_codes = np.fromiter(
            (index.setdefault(k, len(index)) for k in keys.gather(starts).to_list()),
            dtype=np.uint32, count=len(starts),
        )
        lengths = np.diff(np.append(starts, keys.len()))
        return Codes(np.repeat(run_codes, lengths), list(index))
    names = keys.unique(maintain_order=True)
    return Codes(keys.cast(pl.Enum(names)).to_physical().to_numpy(), names.to_list())
