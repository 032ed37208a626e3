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

    >>> r = resample(np.arange(8.0), np.array([1, 5, 2, 2, np.nan, 3, 9, 3.0]), np.linspace(0, 8, 3))
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
