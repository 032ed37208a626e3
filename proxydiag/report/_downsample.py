"""Downsampling for drawing only: min/max-preserving buckets; non-finite points kept apart.

A 10^5-step curve drawn point by point makes a multi-megabyte page that looks the same as
a few thousand well-chosen points. Each bucket of consecutive points keeps its minimum and its
maximum (and the first and last point of the series), so a one-step spike survives. NaN, +inf
and -inf cannot be drawn on a value axis: they are returned separately, to be drawn as markers,
and the drawn line is broken where they occur (never joined across them). Numbers shown in
tables always come from the full data, never from these arrays.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from proxydiag.align.resample import extrema_indices

FloatArray = npt.NDArray[np.float64]

#: buckets per curve; each keeps its min and max, so at most twice as many points are drawn
DEFAULT_BUCKETS = 1000
#: at most this many markers per non-finite kind; the first of every marker bucket is kept
DEFAULT_MAX_MARKERS = 400


@dataclass(frozen=True)
class Drawable:
    """A curve ready to draw.

    ``x``/``y`` is the finite line, with NaN inserted wherever non-finite points interrupt it
    (plotly breaks the line there); ``nan_x``, ``posinf_x``, ``neginf_x`` are the positions of
    NaN, +inf and -inf points (thinned to a bounded count, the first of each kept);
    ``n_nan``/``n_posinf``/``n_neginf`` are the true counts from the full data.
    """

    x: FloatArray
    y: FloatArray
    nan_x: FloatArray
    posinf_x: FloatArray
    neginf_x: FloatArray
    n_nan: int
    n_posinf: int
    n_neginf: int

    @property
    def n_nonfinite(self) -> int:
        return self.n_nan + self.n_posinf + self.n_neginf


def minmax_indices(y: FloatArray, *, n_buckets: int = DEFAULT_BUCKETS) -> npt.NDArray[np.int64]:
    """Sorted indices keeping each bucket's min and max plus the first and last point.

    ``y`` must be finite. Buckets are consecutive runs of equal length; a flat bucket keeps
    both its ends (:func:`proxydiag.align.resample.extrema_indices` with ``ties="spread"``).

    >>> y = np.zeros(10_000); y[4321] = 50.0; y[777] = -3.0
    >>> idx = minmax_indices(y, n_buckets=10)
    >>> len(idx) <= 22, 4321 in idx, 777 in idx
    (True, True, True)
    """
    n = len(y)
    if n <= 2 * n_buckets:
        return np.arange(n, dtype=np.int64)
    starts = -(-np.arange(n_buckets, dtype=np.int64) * n // n_buckets)  # ceil(i·n / buckets)
    keep = np.concatenate([extrema_indices(y, starts, ties="spread"), [0, n - 1]])
    return np.unique(keep)


def _thin(x: FloatArray, *, max_points: int) -> FloatArray:
    """At most ``max_points`` of sorted positions ``x``: the first in each equal-width bucket."""
    if len(x) <= max_points:
        return x
    span = float(x[-1] - x[0]) or 1.0
    bucket = np.minimum(((x - x[0]) / span * max_points).astype(np.int64), max_points - 1)
    _, first = np.unique(bucket, return_index=True)
    return x[np.sort(first)]


def prepare(
    x: npt.ArrayLike,
    y: npt.ArrayLike,
    *,
    n_buckets: int = DEFAULT_BUCKETS,
    max_markers: int = DEFAULT_MAX_MARKERS,
) -> Drawable:
    """Split a series into a downsampled finite line and non-finite marker positions.

    ``x`` must be sorted ascending.

    >>> d = prepare([1, 2, 3, 4, 5], [1.0, float("nan"), 3.0, float("inf"), 5.0])
    >>> d.x.tolist(), d.nan_x.tolist(), d.posinf_x.tolist(), d.n_nonfinite
    ([1.0, 2.0, 3.0, 4.0, 5.0], [2.0], [4.0], 2)
    >>> np.isnan(d.y).tolist()  # the line breaks at both non-finite points
    [False, True, False, True, False]
    """
    xs = np.asarray(x, dtype=np.float64)
    ys = np.asarray(y, dtype=np.float64)
    finite = np.isfinite(ys)
    fin_idx = np.flatnonzero(finite)
    kept = fin_idx[minmax_indices(ys[fin_idx], n_buckets=n_buckets)]
    # the first point of every run of non-finite values becomes a gap in the line
    bad = ~finite
    gap_idx = np.flatnonzero(bad & ~np.concatenate([[False], bad[:-1]]))
    line_idx = np.union1d(kept, gap_idx)
    line_y = np.where(finite[line_idx], ys[line_idx], np.nan)
    nan_x, pos_x, neg_x = xs[np.isnan(ys)], xs[ys == np.inf], xs[ys == -np.inf]
    return Drawable(
        x=xs[line_idx],
        y=line_y,
        nan_x=_thin(nan_x, max_points=max_markers),
        posinf_x=_thin(pos_x, max_points=max_markers),
        neginf_x=_thin(neg_x, max_points=max_markers),
        n_nan=len(nan_x),
        n_posinf=len(pos_x),
        n_neginf=len(neg_x),
    )


def bucket_means(x: FloatArray, y: FloatArray, *, edges: FloatArray) -> FloatArray:
    """Mean of the finite ``y`` in each bucket ``[edges[i], edges[i+1])`` (NaN where empty).

    Used for the band of full-run seeds: per seed, a bucket mean; across seeds, min and max.

    >>> bucket_means(np.arange(6.0), np.array([1, 3, 5, 7, np.nan, 11.0]),
    ...              edges=np.array([0.0, 2.0, 4.0, 6.0])).tolist()
    [2.0, 6.0, 11.0]
    """
    n = len(edges) - 1
    ok = np.isfinite(y) & (x >= edges[0]) & (x <= edges[-1])
    b = np.clip(np.searchsorted(edges, x[ok], side="right") - 1, 0, n - 1)
    sums = np.bincount(b, weights=y[ok], minlength=n)
    counts = np.bincount(b, minlength=n)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)
