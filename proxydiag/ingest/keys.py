"""A raw frame's keys as small integer codes, in runs: what
:func:`~proxydiag.ingest.build.build_run` groups, sorts and maps on instead of hashing a
string per row.

Rows come in *runs* of one key: a wide table unpivoted column by column is one run per key,
a console log parsed block by block a few runs per key and block, a TensorBoard file one
run per point (its keys interleave). A ``Utf8`` column costs one comparison per row to cut
into runs; only a column whose key changes on most rows is hashed. A reader that already
numbers its keys (TensorBoard's tag table) hands them over as a polars ``Enum`` column
(:func:`enum_keys`) and the codes are free.
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
    """Rows ``starts[i]`` up to ``starts[i + 1]`` (or ``n``) have key ``names[run_codes[i]]``."""

    names: list[str]
    starts: np.ndarray
    run_codes: np.ndarray
    n: int

    @property
    def lengths(self) -> np.ndarray:
        return np.diff(np.append(self.starts, self.n))

    def per_row(self) -> np.ndarray:
        """The code of every row."""
        return np.repeat(self.run_codes, self.lengths)


def enum_keys(ids: np.ndarray, names: Sequence[str]) -> pl.Series:
    """A ``key`` column from integer ids into ``names`` (distinct), without building strings.

    >>> enum_keys(np.array([1, 0, 1]), ["loss", "lr"]).cast(pl.Utf8).to_list()
    ['lr', 'loss', 'lr']
    """
    dtype = pl.Enum(list(names))
    physical = pl.Series(dtype=dtype).to_physical().dtype  # UInt8, UInt16 or UInt32 by size
    return pl.Series("key", ids).cast(physical).cat.to(dtype)


def of(keys: pl.Series) -> Codes:
    """The runs and codes of a ``key`` column (``Utf8`` or ``Enum``); names in order of first
    appearance for text, in category order for an ``Enum``.

    >>> c = of(pl.Series(["b", "b", "a", "b"]))
    >>> c.names, c.starts.tolist(), c.run_codes.tolist(), c.per_row().tolist()
    (['b', 'a'], [0, 2, 3], [0, 1, 0], [0, 0, 1, 0])
    """
    if keys.null_count():
        raise FrameError("the raw frame has rows without a key")
    n = keys.len()
    if isinstance(keys.dtype, pl.Enum):
        codes = keys.to_physical().to_numpy()
        return _runs(codes, keys.dtype.categories.to_list())
    if n == 0:
        return Codes([], np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.uint32), 0)
    starts = (keys != keys.shift(1)).fill_null(True).arg_true().to_numpy()
    if len(starts) * _ROWS_PER_RUN <= n:
        index: dict[str, int] = {}
        run_codes = np.fromiter(
            (index.setdefault(k, len(index)) for k in keys.gather(starts).to_list()),
            dtype=np.uint32, count=len(starts),
        )
        return Codes(list(index), starts, run_codes, n)
    names = keys.unique(maintain_order=True)
    return _runs(keys.cast(pl.Enum(names)).to_physical().to_numpy(), names.to_list())


def _runs(codes: np.ndarray, names: list[str]) -> Codes:
    starts = np.flatnonzero(np.diff(codes, prepend=codes[:1] + 1)) if len(codes) else codes
    return Codes(names, starts.astype(np.int64), codes[starts], len(codes))
