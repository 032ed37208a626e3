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
    codes = pl.Series("key", ids)
    return (codes if codes.dtype == physical else codes.cast(physical)).cat.to(dtype)


def of(keys: pl.Series) -> Codes:
    """The runs and codes of a ``key`` column (``Utf8``, ``Categorical`` or ``Enum``); names in
    order of first appearance for text and categoricals, in category order for an ``Enum``.

    >>> c = of(pl.Series(["b", "b", "a", "b"]))
    >>> c.names, c.starts.tolist(), c.run_codes.tolist(), c.per_row().tolist()
    (['b', 'a'], [0, 2, 3], [0, 1, 0], [0, 0, 1, 0])
    >>> of(pl.Series(["b", "b", "a", "b"], dtype=pl.Categorical)).per_row().tolist()
    [0, 0, 1, 0]
    """
    if keys.null_count():
        raise FrameError("the raw frame has rows without a key")
    n = keys.len()
    if isinstance(keys.dtype, pl.Enum):
        codes = keys.to_physical().to_numpy()
        return _runs(codes, keys.dtype.categories.to_list())
    if n == 0:
        return Codes([], np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.uint32), 0)
    if isinstance(keys.dtype, pl.Categorical):  # a run ends where the category id changes
        starts = _run_starts(keys.to_physical().to_numpy())
    else:
        changes = (keys.slice(1) != keys.slice(0, n - 1)).arg_true().to_numpy()  # no copies
        starts = np.concatenate(([0], changes.astype(np.int64) + 1))
    if len(starts) * _ROWS_PER_RUN <= n:
        index: dict[str, int] = {}
        run_codes = np.fromiter(
            (index.setdefault(k, len(index)) for k in keys.gather(starts).to_list()),
            dtype=np.uint32, count=len(starts),
        )
        return Codes(list(index), starts, run_codes, n)
    names = keys.unique(maintain_order=True).cast(pl.Utf8)
    return _runs(keys.cast(pl.Enum(names)).to_physical().to_numpy(), names.to_list())


def _run_starts(codes: np.ndarray) -> np.ndarray:
    """Where each run of equal codes starts (a comparison of neighbours: 20x faster than a
    ``diff`` and a search for non-zeros)."""
    if not len(codes):
        return np.zeros(0, dtype=np.int64)
    starts = np.flatnonzero(codes[1:] != codes[:-1]) + 1
    return np.concatenate((np.zeros(1, dtype=starts.dtype), starts))


def _runs(codes: np.ndarray, names: list[str]) -> Codes:
    starts = _run_starts(codes)
    return Codes(names, starts, codes[starts], len(codes))
