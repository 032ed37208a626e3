"""NaN-aware centred moving average on the analysis grid (gaps stay gaps)."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

Floats = npt.NDArray[np.float64]


def smooth(values: Floats, *, window_points: int) -> Floats:
    """Centred moving average over ``window_points`` points, ignoring NaN; NaN stays NaN.

    Works along the last axis, so a (runs × points) array is smoothed row by row.

    >>> smooth(np.array([1.0, 2.0, np.nan, 4.0, 5.0]), window_points=3).tolist()
    [1.5, 1.5, nan, 4.5, 4.5]
    """
    window_points = max(1, int(window_points))
    if window_points == 1:
        return values.astype(np.float64, copy=True)
    finite = np.isfinite(values)
    filled = np.where(finite, values, 0.0)
    half_lo, half_hi = (window_points - 1) // 2, window_points // 2
    pad = [(0, 0)] * (values.ndim - 1) + [(half_lo + 1, half_hi)]
    csum = np.cumsum(np.pad(filled, pad), axis=-1)
    ccount = np.cumsum(np.pad(finite.astype(np.float64), pad), axis=-1)
    n = values.shape[-1]
    sums = csum[..., window_points : window_points + n] - csum[..., :n]
    counts = ccount[..., window_points : window_points + n] - ccount[..., :n]
    with np.errstate(invalid="ignore", divide="ignore"):
        out = sums / counts
    return np.where(finite, out, np.nan)


def window_for(n_points: int, *, fraction: float) -> int:
    """The smoothing window for a curve of ``n_points``: ``fraction`` of it, at least 1 point.

    >>> window_for(1000, fraction=0.05)
    50
    """
    return max(1, round(fraction * n_points))
