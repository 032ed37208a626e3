"""Robust, vectorised statistics shared by the detectors (medians, MADs, rolling windows)."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
from numpy.lib.stride_tricks import sliding_window_view

#: MAD -> σ for a normal distribution
MAD_TO_SIGMA = 1.4826
#: a floor for σ so that a perfectly flat series does not make every wiggle infinite
EPS = 1e-12


def robust_level(values: np.ndarray) -> tuple[float, float]:
    """Median and robust σ (1.4826·MAD) of the finite values; (nan, nan) when there are none.

    >>> robust_level(np.array([1.0, 2.0, 3.0, 100.0, np.nan]))
    (2.5, 1.4826)
    """
    x = values[np.isfinite(values)]
    if x.size == 0:
        return float("nan"), float("nan")
    med = float(np.median(x))
    return med, float(MAD_TO_SIGMA * np.median(np.abs(x - med)))


def noise_sigma(values: np.ndarray) -> float:
    """Robust σ of the point-to-point noise: MAD of first differences / √2 (trend-insensitive).

    >>> round(noise_sigma(np.arange(10.0)), 6)
    0.0
    """
    x = values[np.isfinite(values)]
    if x.size < 3:
        return 0.0
    d = np.diff(x)
    return float(MAD_TO_SIGMA * np.median(np.abs(d - np.median(d))) / np.sqrt(2.0))


def safe_log(values: np.ndarray, *, floor: float = EPS) -> np.ndarray:
    """log(max(|x|, floor)) with non-finite inputs kept as NaN."""
    out = np.full(values.shape, np.nan)
    ok = np.isfinite(values)
    out[ok] = np.log(np.maximum(np.abs(values[ok]), floor))
    return out


def rolling_median(values: np.ndarray, *, window_points: int, center: bool = False) -> np.ndarray:
    """Rolling median over ``window_points`` (trailing by default), ignoring NaN.

    >>> rolling_median(np.array([1.0, 5.0, 2.0, 8.0]), window_points=3).tolist()
    [1.0, 3.0, 2.0, 5.0]
    >>> rolling_median(np.array([1.0, 5.0, 2.0, 8.0, 0.0]), window_points=3, center=True).tolist()
    [3.0, 2.0, 5.0, 2.0, 4.0]
    """
    n = values.size
    if (
        center
        and window_points % 2 == 1
        and 3 <= window_points <= n
        and window_points <= 15
        and (np.isfinite(values).all())
    ):
        # short centred windows (the smoothing before a fit): numpy, without a query's overhead
        h = window_points // 2
        out = np.empty(n)
        out[h : n - h] = np.median(sliding_window_view(values, window_points), axis=1)
        for i in range(h):  # the edges use the part of the window inside the series
            out[i] = np.median(values[: i + h + 1])
            out[n - 1 - i] = np.median(values[n - 1 - i - h :])
        return out
    s = pl.Series(values).fill_nan(None)
    rolled = s.rolling_median(window_size=window_points, min_samples=1, center=center)
    return rolled.fill_null(np.nan).to_numpy().astype(np.float64)


def rolling_mad(values: np.ndarray, median: np.ndarray, *, window_points: int) -> np.ndarray:
    """Rolling robust σ (1.4826·MAD) of ``values`` around ``median``, trailing."""
    dev = np.abs(values - median)
    return MAD_TO_SIGMA * rolling_median(dev, window_points=window_points)


def window_sum(steps: np.ndarray, counts: np.ndarray, *, window_steps: float) -> np.ndarray:
    """For each point, the sum of ``counts`` logged in the ``window_steps`` steps ending there.

    >>> window_sum(np.array([1, 2, 3, 10]), np.array([1.0, 1.0, 1.0, 1.0]), window_steps=3).tolist()
    [1.0, 2.0, 3.0, 1.0]
    """
    csum = np.concatenate([[0.0], np.cumsum(counts)])
    lo = np.searchsorted(steps, steps - window_steps, side="right")
    out: np.ndarray = csum[np.arange(1, steps.size + 1)] - csum[lo]
    return out


def runs_of(mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Start and end (exclusive) indices of the runs of True in ``mask``.

    >>> [a.tolist() for a in runs_of(np.array([0, 1, 1, 0, 1], dtype=bool))]
    [[1, 4], [3, 5]]
    """
    padded = np.concatenate([[False], mask, [False]]).astype(np.int8)
    edges = np.diff(padded)
    return np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)


def downsample(
    steps: np.ndarray, values: np.ndarray, *, max_points: int
) -> tuple[np.ndarray, np.ndarray]:
    """Bucket means of at most ``max_points`` buckets (for O(n²) tests like Theil-Sen)."""
    if steps.size <= max_points:
        return steps.astype(np.float64), values
    edges = np.linspace(0, steps.size, max_points + 1).astype(np.int64)
    counts = np.diff(edges)
    s = np.add.reduceat(steps.astype(np.float64), edges[:-1]) / counts
    v = np.add.reduceat(values, edges[:-1]) / counts
    return s, v


def bucket_medians(
    t: np.ndarray, y: np.ndarray, *, max_points: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Medians of ``y`` in at most ``max_points`` equal buckets (robust: a spike does not move
    a bucket), each at its first ``t``; also the index where each bucket starts.

    >>> tb, yb, starts = bucket_medians(np.arange(10.0), np.arange(10.0), max_points=3)
    >>> tb.tolist(), yb.tolist(), starts.tolist()
    ([0.0, 4.0, 8.0], [1.5, 5.5, 8.5], [0, 4, 8])
    """
    n = y.size
    width = -(-n // max_points)
    full = (n // width) * width
    starts = np.arange(0, n, width)
    med = np.median(y[:full].reshape(-1, width), axis=1)
    if full < n:
        med = np.append(med, np.median(y[full:]))
    return t[starts].astype(np.float64), med, starts


def block_level(values: np.ndarray, *, window_points: int) -> np.ndarray:
    """Each point's block median, blocks of ``window_points`` (a cheap sustained level for
    long windows, where an exact rolling median would cost O(n·log w) per call).

    >>> block_level(np.array([1.0, 9.0, 2.0, 3.0, 4.0]), window_points=2).tolist()
    [5.0, 5.0, 2.5, 2.5, 4.0]
    """
    n = values.size
    if n == 0:
        return values.astype(np.float64)
    width = max(1, min(window_points, n))
    _, med, starts = bucket_medians(np.arange(n), values, max_points=-(-n // width))
    return np.repeat(med, np.diff(np.append(starts, n)))


def cluster_start(hit_steps: np.ndarray, step: float, *, gap_steps: float) -> int:
    """Walk back from ``step`` through ``hit_steps`` (sorted) while consecutive hits are at
    most ``gap_steps`` apart; the first step of that cluster.

    >>> cluster_start(np.array([10, 50, 53, 55, 60, 61]), 61, gap_steps=6)
    50
    """
    upto = hit_steps[hit_steps <= step]
    if upto.size == 0:
        return int(step)
    breaks = np.flatnonzero(np.diff(upto) > gap_steps)
    return int(upto[breaks[-1] + 1]) if breaks.size else int(upto[0])


def _tie_sums(values: np.ndarray) -> tuple[float, float, float]:
    """Over groups of equal values of size t: sum t(t-1)/2, sum t(t-1)(t-2), sum t(t-1)(2t+5)."""
    _, counts = np.unique(values, return_counts=True)
    t = counts[counts > 1].astype(np.float64)
    return (
        float((t * (t - 1) / 2).sum()),
        float((t * (t - 1) * (t - 2)).sum()),
        float((t * (t - 1) * (2 * t + 5)).sum()),
    )


def kendall_tau(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """Kendall's tau-b and its two-sided p-value: scipy's ``kendalltau`` (asymptotic variance
    with ties), in numpy, so a diagnosis does not import ``scipy.stats`` (half a second of
    docstring parsing at import). Where scipy computes an exact p-value (no ties and at most 33
    points, or at most one discordant pair: a monotone series) so does :func:`_exact_p`.

    >>> t, p = kendall_tau(np.arange(50.0), np.arange(50.0) ** 2)
    >>> round(t, 6), p < 1e-10
    (1.0, True)
    """
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    n = x.size
    if n < 2:
        return float("nan"), float("nan")
    i, j = np.triu_indices(n, k=1)
    sx, sy = np.sign(x[j] - x[i]), np.sign(y[j] - y[i])
    s = float((sx * sy).sum())
    total = n * (n - 1) / 2
    xtie, x0, x1 = _tie_sums(x)
    ytie, y0, y1 = _tie_sums(y)
    if xtie == total or ytie == total:
        return float("nan"), float("nan")
    both = float(((sx == 0) & (sy == 0)).sum())
    discordant = (total - xtie - ytie + both - s) / 2
    if xtie == 0 and ytie == 0 and (n <= 33 or min(discordant, total - discordant) <= 1):
        tau = s / math.sqrt(total) / math.sqrt(total)  # scipy's order of operations
        return float(min(1.0, max(-1.0, tau))), _exact_p(n, round(total - discordant))
    tau = s / math.sqrt((total - xtie) * (total - ytie))
    var = (
        (n * (n - 1) * (2.0 * n + 5) - x1 - y1) / 18.0
        + (2.0 * xtie * ytie) / (n * (n - 1))
        + x0 * y0 / (9.0 * n * (n - 1) * (n - 2))
    )
    z = s / math.sqrt(var)
    return float(min(1.0, max(-1.0, tau))), float(math.erfc(abs(z) / math.sqrt(2.0)))


def _exact_p(n: int, concordant: int) -> float:
    """The exact two-sided p-value of Kendall's tau of ``n`` points without ties, ``concordant``
    pairs of them concordant: scipy's ``_kendall_p_exact`` (Kendall, *Rank Correlation
    Methods*, 1970), the count of permutations with at most that many inversions.

    >>> _exact_p(5, 10), _exact_p(5, 5)  # monotone; half the pairs discordant
    (0.016666666666666666, 1.0)
    """
    c = min(concordant, n * (n - 1) // 2 - concordant)  # the distribution is symmetric
    if n <= 2 or 4 * c == n * (n - 1):
        return 1.0
    if c == 0:
        return 2.0 / math.factorial(n) if n < 171 else 0.0
    if c == 1:
        return 2.0 / math.factorial(n - 1) if n < 172 else 0.0
    counts = np.zeros(c + 1)
    counts[0:2] = 1.0
    for j in range(3, n + 1):
        counts = np.cumsum(counts) if n < 171 else np.cumsum(counts) / j
        if j <= c:
            counts[j:] -= counts[: c + 1 - j]
    prob = 2.0 * np.sum(counts) / math.factorial(n) if n < 171 else np.sum(counts)
    return float(np.clip(prob, 0.0, 1.0))


def theil_sen_slope(y: np.ndarray, x: np.ndarray) -> float:
    """The Theil-Sen slope: the median of the slopes between every two points with different
    ``x`` (scipy's ``theilslopes(y, x).slope``).

    >>> theil_sen_slope(np.array([0.0, 2.0, 4.0, 6.0, 100.0]), np.arange(5.0))  # one outlier
    2.0
    """
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    dx = x[:, np.newaxis] - x
    dy = y[:, np.newaxis] - y
    keep = dx > 0
    return float(np.median(dy[keep] / dx[keep])) if keep.any() else float("nan")
