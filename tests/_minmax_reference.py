"""The two min/max reductions as they were before they shared ``extrema_indices`` (the oracle).

Verbatim copies (docstrings shortened) of ``align.resample.minmax_downsample`` and
``report.downsample.minmax_indices`` before the merge; ``test_align.py`` requires the merged
code to return exactly what these return.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

Floats = npt.NDArray[np.float64]


def minmax_downsample(values: Floats, *, max_points: int) -> Floats:
    finite = values[np.isfinite(values)]
    if values.size <= max_points:
        return finite
    group = -(-values.size // (max_points // 2))
    padded = np.pad(values, (0, (-values.size) % group), constant_values=np.nan)
    rows = padded.reshape(-1, group)
    keep = np.isfinite(rows).any(axis=1)
    rows = rows[keep]
    i_lo = np.nanargmin(rows, axis=1)
    i_hi = np.nanargmax(rows, axis=1)
    r = np.arange(rows.shape[0])
    first = np.where(i_lo <= i_hi, rows[r, i_lo], rows[r, i_hi])
    second = np.where(i_lo <= i_hi, rows[r, i_hi], rows[r, i_lo])
    return np.column_stack([first, second]).ravel()


def minmax_indices(y: Floats, *, n_buckets: int = 1000) -> npt.NDArray[np.int64]:
    n = len(y)
    if n <= 2 * n_buckets:
        return np.arange(n, dtype=np.int64)
    bucket = np.arange(n, dtype=np.int64) * n_buckets // n
    order = np.lexsort((y, bucket))  # by bucket, then by value
    starts = np.searchsorted(bucket[order], np.arange(n_buckets), side="left")
    ends = np.append(starts[1:], n) - 1
    keep = np.concatenate([order[starts], order[ends], [0, n - 1]])
    return np.unique(keep)
