"""Small vectorised statistics the fidelity tests share (rows are bootstrap replicates)."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

Floats = npt.NDArray[np.float64]

#: MAD -> standard deviation of a normal distribution
MAD_TO_SIGMA = 1.4826
#: the smallest normal float: a spread below it is subnormal
_TINY = float(np.finfo(np.float64).tiny)


def ranks(values: Floats) -> Floats:
    """Average ranks (ties share a rank) along the last axis, as Spearman's rho uses them.

    >>> ranks(np.array([[3.0, 1, 1], [1, 2, 3]])).tolist()
    [[3.0, 1.5, 1.5], [1.0, 2.0, 3.0]]
    """
    from scipy.stats import rankdata  # scipy.stats costs ~0.3 s to import: not at import proxydiag

    return np.asarray(rankdata(values, axis=-1), dtype=np.float64)


def row_pearson(x: Floats, y: Floats) -> Floats:
    """Pearson correlation of ``x`` and ``y`` along the last axis (0 where one is constant,
    1 where both are).

    >>> row_pearson(
    ...     np.array([[1.0, 2, 3], [1, 2, 3]]), np.array([[2.0, 4, 7], [3, 2, 1]])
    ... ).round(3).tolist()
    [0.993, -1.0]
    """
    xc = x - x.mean(axis=-1, keepdims=True)
    yc = y - y.mean(axis=-1, keepdims=True)
    sxx, syy = (xc * xc).sum(axis=-1), (yc * yc).sum(axis=-1)
    sxy = (xc * yc).sum(axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        rho = sxy / np.sqrt(sxx * syy)
    both_constant = (sxx == 0) & (syy == 0)
    return np.where(both_constant, 1.0, np.where(np.isfinite(rho), rho, 0.0))


def robust_sigma(values: Floats) -> Floats:
    """1.4826 × the median absolute deviation along the last axis, falling back to
    1.2533 × the mean absolute deviation where the MAD is 0 (step-like series, e.g. a loss scale
    that changes on few steps); both estimate σ for normal data.

    >>> float(robust_sigma(np.array([0.0, 0, 0, 0, 4])))
    1.0026...
    """
    centre = np.median(values, axis=-1, keepdims=True)
    dev = np.abs(values - centre)
    mad = MAD_TO_SIGMA * np.median(dev, axis=-1)
    mean_abs = np.sqrt(np.pi / 2) * dev.mean(axis=-1)
    return np.asarray(np.where(mad > 0, mad, mean_abs), dtype=np.float64)


def normalise(values: Floats) -> Floats:
    """Centre on the median and scale by the interquartile range (σ when the IQR is 0), along
    the last axis.

    >>> normalise(np.array([1.0, 2.0, 3.0, 4.0, 5.0])).tolist()
    [-1.0, -0.5, 0.0, 0.5, 1.0]
    >>> normalise(np.array([[1.0, 2, 3], [5, 5, 5]])).tolist()
    [[-1.0, 0.0, 1.0], [0.0, 0.0, 0.0]]
    """
    q1, med, q3 = np.percentile(values, [25, 50, 75], axis=-1, keepdims=True)
    scale = q3 - q1
    # a subnormal spread has lost its precision (and scales the values beyond the float
    # range): no spread, like 0
    if np.any(scale <= _TINY):
        scale = np.where(scale <= _TINY, robust_sigma(values)[..., None], scale)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        out = np.where(scale > _TINY, (values - med) / scale, values - med)
    return np.asarray(out, dtype=np.float64)


def increments(values: Floats, *, log_scale: bool) -> Floats:
    """Step-to-step changes of ``values`` (of ``log(values)`` for positive metrics)."""
    return np.diff(np.log(values) if log_scale else values)


def percentile_ci(replicates: Floats, *, level: float) -> tuple[float, float]:
    """Percentile interval of bootstrap replicates (NaN replicates ignored)."""
    finite = replicates[np.isfinite(replicates)]
    if finite.size == 0:
        return (float("nan"), float("nan"))
    tail = (1 - level) / 2 * 100
    lo, hi = np.percentile(finite, [tail, 100 - tail])
    return (float(lo), float(hi))


def binned_sigma(values: Floats, idx: npt.NDArray[np.int64], *, bins: int = 256) -> Floats:
    """Robust σ (as :func:`robust_sigma`) of ``values[idx]`` for every row of ``idx``, centred on
    the median of ``values`` and with the median of each row read from ``bins`` quantile bins of
    the absolute deviations (vectorised bootstrap replicates; exact to within one bin).

    >>> v = np.random.default_rng(0).normal(size=2000)
    >>> idx = np.random.default_rng(1).integers(0, 2000, size=(3, 2000))
    >>> bool(np.allclose(binned_sigma(v, idx), robust_sigma(v[idx]), rtol=0.05))
    True
    """
    dev = np.abs(values - np.median(values))
    edges = np.quantile(dev, np.linspace(0, 1, bins + 1))
    which = np.clip(np.searchsorted(edges, dev, side="right") - 1, 0, bins - 1)
    n_rows, n = idx.shape
    counts = np.bincount(
        (np.arange(n_rows)[:, None] * bins + which[idx]).ravel(), minlength=n_rows * bins
    ).reshape(n_rows, bins)
    cum = np.cumsum(counts, axis=1)
    k = np.argmax(cum >= n / 2, axis=1)
    below = np.where(k > 0, cum[np.arange(n_rows), k - 1], 0)
    frac = (n / 2 - below) / np.maximum(counts[np.arange(n_rows), k], 1)
    mad = edges[k] + frac * (edges[k + 1] - edges[k])
    out = MAD_TO_SIGMA * mad
    flat = ~(mad > 0)  # the mean absolute deviation where the MAD is 0, as robust_sigma does
    if flat.any():
        out[flat] = np.sqrt(np.pi / 2) * dev[idx[flat]].mean(axis=1)
    return np.asarray(out, dtype=np.float64)
