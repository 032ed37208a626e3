"""A raw frame's keys as small integer codes, in runs: what
:func:`~proxydiag.run.build.build_run` groups, sorts and maps on instead of hashing a
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
from proxydiag.run import threads

#: at most one run of equal keys per this many rows, or the column is hashed instead
_ROWS_PER_RUN = 4
#: rows of a text column looked at first, to tell keys in runs from interleaved ones
_PROBE = 4096
#: a text column is cut into runs in parts of at least this many rows, side by side
_PART_ROWS = 1 << 16


@dataclass(frozen=True)
class Codes:
    """Rows ``starts[i]`` up to ``starts[i + 1]`` (or ``n``) have key ``names[run_codes[i]]``.

    Keys that change on most rows (a TensorBoard file's interleaved tags) are not cut into
    runs of one row each: ``rows`` holds their code per row, and ``starts``/``run_codes``
    are empty.
    """

    names: list[str]
    starts: np.ndarray
    run_codes: np.ndarray
    n: int
    rows: np.ndarray | None = None

    @property
    def lengths(self) -> np.ndarray:
        return np.diff(np.append(self.starts, self.n))

    def per_row(self) -> np.ndarray:
        """The code of every row."""
        return self.rows if self.rows is not None else np.repeat(self.run_codes, self.lengths)

    def present(self) -> np.ndarray:
        """Which of ``names`` some row has (an ``Enum`` may name keys without rows)."""
        codes = self.rows if self.rows is not None else self.run_codes
        return np.bincount(codes, minlength=len(self.names)) > 0


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

    >>> c = of(pl.Series(["b"] * 4 + ["a"] * 4 + ["b"] * 4))
    >>> c.names, c.starts.tolist(), c.run_codes.tolist(), c.rows is None
    (['b', 'a'], [0, 4, 8], [0, 1, 0], True)
    >>> c = of(pl.Series(["b", "b", "a", "b"], dtype=pl.Categorical))  # changes on most rows
    >>> c.names, c.per_row().tolist(), c.starts.size
    (['b', 'a'], [0, 0, 1, 0], 0)
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
        ids = keys.to_physical().to_numpy()
        starts = _run_starts(ids) if _in_runs(ids) else None
        firsts = keys.gather(starts).to_list() if starts is not None else []
    else:  # polars' run-length encoding: 2x faster than comparing neighbours
        starts, firsts = None, []
        # keys that change on most rows of the first _PROBE are hashed at once: their
        # encoding would hold about a copy of the column for nothing
        probe = min(n, _PROBE)
        if keys.head(probe).rle().len() * _ROWS_PER_RUN <= probe:
            lengths, firsts = _rle(keys)
            if len(lengths) * _ROWS_PER_RUN <= n:
                starts = np.concatenate(([0], np.cumsum(lengths[:-1])))
    if starts is not None and len(starts) * _ROWS_PER_RUN <= n:
        index: dict[str, int] = {}
        run_codes = np.fromiter(
            (index.setdefault(k, len(index)) for k in firsts),
            dtype=np.uint32,
            count=len(starts),
        )
        return Codes(list(index), starts, run_codes, n)
    names = keys.unique(maintain_order=True).cast(pl.Utf8)
    return _runs(keys.cast(pl.Enum(names)).to_physical().to_numpy(), names.to_list())


def _rle(keys: pl.Series) -> tuple[np.ndarray, list[str]]:
    """The lengths and keys of the runs of a text column: its parts encoded side by side
    (polars encodes on one core: 1.1 ms instead of 2.1 for 10^6 keys on 2 cores), a run
    that crosses a part's end joined back."""
    spans = threads.parts(keys.len(), least=_PART_ROWS)
    lengths: list[int] = []
    firsts: list[str] = []
    for runs in threads.side_by_side(lambda a, b: keys.slice(a, b - a).rle(), spans):
        part_lengths = runs.struct.field("len").to_list()
        part_keys = runs.struct.field("value").to_list()
        if firsts and part_keys and part_keys[0] == firsts[-1]:
            lengths[-1] += part_lengths.pop(0)
            part_keys.pop(0)
        lengths.extend(part_lengths)
        firsts.extend(part_keys)
    return np.array(lengths, dtype=np.int64), firsts


def _run_starts(codes: np.ndarray) -> np.ndarray:
    """Where each run of equal codes starts (a comparison of neighbours: 20x faster than a
    ``diff`` and a search for non-zeros)."""
    if not len(codes):
        return np.zeros(0, dtype=np.int64)
    starts = np.flatnonzero(codes[1:] != codes[:-1]) + 1
    return np.concatenate((np.zeros(1, dtype=starts.dtype), starts))


def _in_runs(codes: np.ndarray) -> bool:
    """At most one run of equal codes per :data:`_ROWS_PER_RUN` rows."""
    changes = int(np.count_nonzero(codes[1:] != codes[:-1])) if len(codes) else 0
    return (changes + 1) * _ROWS_PER_RUN <= max(len(codes), 1)


def _runs(codes: np.ndarray, names: list[str]) -> Codes:
    if not _in_runs(codes):  # interleaved: the codes themselves, not runs of one row
        empty = np.zeros(0, dtype=np.int64)
        return Codes(names, empty, empty.astype(codes.dtype), len(codes), rows=codes)
    starts = _run_starts(codes)
    return Codes(names, starts, codes[starts], len(codes))
