"""Resampling one series onto the analysis grid: one logged point and the min/max per bucket.

Nothing is interpolated. Each bucket of the grid keeps

* ``sample``: the last *finite logged* point in the bucket (a real observation, not an average,
  so the noise of runs logged every step and every 10 steps stays comparable), and
* ``envelope``: the bucket's min and max in the order they occurred (spikes survive),

and a bucket with no finite point is NaN: a gap, not a guess. Non-finite points are counted and
their positions kept; they never enter a curve.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt

Floats = npt.NDArray[np.float64]


@dataclass(frozen=True)
class Resampled:
    """One run's series on a grid of ``B`` buckets."""

    sample: Floats  # (B,)
    envelope: Floats  # (2B,)
    n_finite: int
    nonfinite_x: Floats  # axis positions of NaN/±inf points inside the range


def resample(x: Floats, values: Floats, edges: Floats) -> Resampled:
    """Bucket ``values`` (at sorted axis positions ``x``) into the buckets bounded by ``edges``.

    >>> r = resample(
    ...     np.arange(8.0), np.array([1, 5, 2, 2, np.nan, 3, 9, 3.0]), np.linspace(0, 8, 3)
    ... )
    >>> r.sample.tolist(), r.envelope.tolist(), r.n_finite, r.nonfinite_x.tolist()
    ([2.0, 3.0], [1.0, 5.0, 3.0, 9.0], 7, [4.0])
    """
    n_buckets = edges.size - 1
    inside = (x >= edges[0]) & (x <= edges[-1])
    finite = np.isfinite(values)
    xf, vf = x[inside & finite], values[inside & finite]
    sample = np.full(n_buckets, np.nan)
    envelope = np.full(2 * n_buckets, np.nan)
    if vf.size:
        bucket = np.clip(np.searchsorted(edges, xf, side="right") - 1, 0, n_buckets - 1)
        last = np.r_[bucket[1:] != bucket[:-1], True]
        sample[bucket[last]] = vf[last]
        envelope[:] = _envelope(bucket, vf, n_buckets)
    return Resampled(sample, envelope, int(vf.size), x[inside & ~finite])


def _envelope(bucket: npt.NDArray[np.int64], vf: Floats, n_buckets: int) -> Floats:
    # points arrive sorted by axis position, so each bucket is one contiguous run
    starts = np.flatnonzero(np.r_[True, bucket[1:] != bucket[:-1]])
    lo, hi = np.minimum.reduceat(vf, starts), np.maximum.reduceat(vf, starts)
    pos = np.arange(vf.size)
    group = np.repeat(np.arange(starts.size), np.diff(np.r_[starts, vf.size]))
    big = vf.size + 1
    first_lo = np.minimum.reduceat(np.where(vf == lo[group], pos, big), starts)
    first_hi = np.minimum.reduceat(np.where(vf == hi[group], pos, big), starts)
    min_first = first_lo <= first_hi
    out = np.full(2 * n_buckets, np.nan)
    filled = bucket[starts]
    out[2 * filled] = np.where(min_first, lo, hi)
    out[2 * filled + 1] = np.where(min_first, hi, lo)
    return out


def minmax_downsample(values: Floats, *, max_points: int) -> Floats:
    """Re-bucket a min/max envelope to at most ``max_points`` points, keeping each group's min
    and max in order of occurrence (NaN gaps ignored; all-NaN groups dropped).

    >>> minmax_downsample(np.array([1.0, 9, 2, 3, np.nan, 0, 5, 5]), max_points=4).tolist()
    [1.0, 9.0, 0.0, 5.0]
    """
    if values.size <= max_points:
        return values[np.isfinite(values)]
    group = -(-values.size // (max_points // 2))
    return values[extrema_indices(values, np.arange(0, values.size, group))]


def extrema_indices(
    values: Floats, starts: npt.NDArray[np.int64], *, ties: Literal["first", "spread"] = "first"
) -> npt.NDArray[np.int64]:
    """Indices of the min and the max of each group of consecutive points, two per group in
    order of occurrence; the min/max-preserving reduction shared by the analysis resolution
    (:func:`minmax_downsample`) and the drawn curves (``report.downsample``).

    Group ``i`` is ``values[starts[i]:starts[i + 1]]`` (the last one runs to the end; none is
    empty). NaN is ignored and a group without a finite value is dropped. ``ties``: the first
    occurrence of the min and of the max (``"first"``), or the first of the min and the last
    of the max (``"spread"``: a flat group keeps both its ends, so a drawn line stays flat).

    >>> v = np.array([3.0, 1, 3, np.nan, np.nan, 2, 2, 2])
    >>> extrema_indices(v, np.array([0, 3, 5])).tolist()
    [0, 1, 5, 5]
    >>> extrema_indices(v, np.array([0, 3, 5]), ties="spread").tolist()
    [1, 2, 5, 7]
    """
    n = values.size
    finite = np.add.reduceat(np.isfinite(values).astype(np.int64), starts) > 0
    group = np.repeat(np.arange(starts.size), np.diff(np.r_[starts, n]))
    pos = np.arange(n, dtype=np.int64)
    lo = np.fmin.reduceat(values, starts)[group]  # fmin/fmax skip NaN
    hi = np.fmax.reduceat(values, starts)[group]
    i_lo = np.minimum.reduceat(np.where(values == lo, pos, n), starts)
    if ties == "first":
        i_hi = np.minimum.reduceat(np.where(values == hi, pos, n), starts)
    else:
        i_hi = np.maximum.reduceat(np.where(values == hi, pos, -1), starts)
    first, second = np.minimum(i_lo, i_hi)[finite], np.maximum(i_lo, i_hi)[finite]
    return np.column_stack([first, second]).ravel()
