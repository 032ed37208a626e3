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
    order = np.lexsort((vf, bucket))  # by bucket, then value: group's first = min, last = max
    b_sorted = bucket[order]
    starts = np.flatnonzero(np.r_[True, b_sorted[1:] != b_sorted[:-1]])
    ends = np.r_[starts[1:], b_sorted.size] - 1
    i_min, i_max = order[starts], order[ends]
    min_first = i_min <= i_max
    out = np.full(2 * n_buckets, np.nan)
    filled = b_sorted[starts]
    out[2 * filled] = np.where(min_first, vf[i_min], vf[i_max])
    out[2 * filled + 1] = np.where(min_first, vf[i_max], vf[i_min])
    return out
