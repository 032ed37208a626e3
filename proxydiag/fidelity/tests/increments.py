"""Distribution of increments: Kolmogorov-Smirnov and Wasserstein distances (scipy) between the
*standardised* step-to-step changes of proxy and full run (KS computed as scipy's
``ks_2samp`` statistic, checked against it in the tests).

Standardising each run's changes by its own robust spread leaves their shape: heavy tails,
skew, the share of jumps; :mod:`~proxydiag.fidelity.tests.volatility` compares the spread
itself. The discrepancy is the KS statistic, judged against seed pairs. Its bootstrap
replicates use 64 quantile bins of the pooled changes (vectorised; the KS statistic at bin edges).
"""

from __future__ import annotations

from functools import partial

import numpy as np
import numpy.typing as npt

from proxydiag.align.grid import MetricGrid
from proxydiag.fidelity._scoring import fmt, reference, relative, seed_score
from proxydiag.fidelity._stats import increments, percentile_ci, robust_sigma
from proxydiag.fidelity.context import MetricContext
from proxydiag.fidelity.result import TestResult
from proxydiag.run import Run

Floats = npt.NDArray[np.float64]
NAME = "increments"
BINS = 64


def standardised(values: Floats, *, log_scale: bool) -> Floats:
    """Changes of ``values``, centred on their median and divided by their robust σ."""
    d = increments(values, log_scale=log_scale)
    d = d[np.isfinite(d)]
    sigma = float(robust_sigma(d)) if d.size else 0.0
    centred = d - (np.median(d) if d.size else 0.0)
    return centred / sigma if sigma > 0 else centred


def ks(x: Floats, y: Floats, *, log_scale: bool) -> float:
    """KS statistic of the standardised changes of two curves.

    >>> ks(np.arange(10.0), np.arange(10.0) * 3, log_scale=False)
    0.0
    """
    sx, sy = standardised(x, log_scale=log_scale), standardised(y, log_scale=log_scale)
    if sx.size == 0 or sy.size == 0:
        return float("nan")
    return ks_statistic(sx, sy)


def ks_rows(x: Floats, y: Floats, *, log_scale: bool) -> Floats:
    """:func:`ks` of each row of ``x`` with the same row of ``y`` (standardised together where
    every change is finite, as :func:`standardised` does row by row)."""
    dx, dy = increments(x, log_scale=log_scale), increments(y, log_scale=log_scale)
    if dx.shape[-1] == 0 or not (np.isfinite(dx).all() and np.isfinite(dy).all()):
        return np.array([ks(a, b, log_scale=log_scale) for a, b in zip(x, y, strict=True)])
    zx, zy = _standardised_rows(dx), _standardised_rows(dy)
    return np.array([ks_statistic(a, b) for a, b in zip(zx, zy, strict=True)])


def _standardised_rows(d: Floats) -> Floats:
    sigma = robust_sigma(d)[:, None]
    centred = d - np.median(d, axis=-1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.asarray(np.where(sigma > 0, centred / sigma, centred), dtype=np.float64)


def ks_statistic(x: Floats, y: Floats) -> float:
    """Two-sample Kolmogorov-Smirnov statistic (``scipy.stats.ks_2samp(...).statistic`` without
    the p-value, which the score does not use and which dominates its cost).

    >>> round(ks_statistic(np.array([1.0, 2, 3]), np.array([2.0, 3, 4])), 4)
    0.3333
    """
    x, y = np.sort(x), np.sort(y)
    pool = np.concatenate([x, y])
    cdf_x = np.searchsorted(x, pool, side="right") / x.size
    cdf_y = np.searchsorted(y, pool, side="right") / y.size
    return float(np.max(np.abs(cdf_x - cdf_y)))


def binned_ks(za: Floats, zb: Floats, idx: npt.NDArray[np.int64]) -> Floats:
    """KS statistic of every bootstrap row of paired changes, on quantile bins of the pool."""
    edges = np.unique(np.quantile(np.concatenate([za, zb]), np.linspace(0, 1, BINS + 1)[1:-1]))
    n_bins = edges.size + 1
    rows = np.arange(idx.shape[0])[:, None] * n_bins
    counts_a = np.bincount(
        (rows + np.searchsorted(edges, za)[idx]).ravel(), minlength=idx.shape[0] * n_bins
    ).reshape(idx.shape[0], n_bins)
    counts_b = np.bincount(
        (rows + np.searchsorted(edges, zb)[idx]).ravel(), minlength=idx.shape[0] * n_bins
    ).reshape(idx.shape[0], n_bins)
    cdf_a = np.cumsum(counts_a, axis=1) / idx.shape[1]
    cdf_b = np.cumsum(counts_b, axis=1) / idx.shape[1]
    return np.asarray(np.abs(cdf_a - cdf_b).max(axis=1), dtype=np.float64)


def score(full_runs: list[Run], proxy: Run, grid: MetricGrid, *, ctx: MetricContext) -> TestResult:
    """KS (and Wasserstein) of the standardised changes against the seed baseline."""
    from scipy.stats import wasserstein_distance  # imported on use, as in stats.ranks

    cfg, log_scale = ctx.config, grid.log_scale
    za = standardised(ctx.a, log_scale=log_scale)
    zb = standardised(ctx.b, log_scale=log_scale)
    value = ks_statistic(za, zb) if za.size and zb.size else float("nan")
    w1 = float(wasserstein_distance(za, zb)) if za.size and zb.size else float("nan")
    base = ctx.on_pairs(partial(ks_rows, log_scale=log_scale))
    ref = reference(base, floor=cfg.floor_increments)
    n = min(za.size, zb.size)
    reps = binned_ks(za[:n], zb[:n], np.minimum(ctx.boot, n - 1)) if n > 1 else np.full(1, value)
    lo, hi = percentile_ci(reps, level=cfg.ci_level)
    lo, hi = min(lo, value), max(hi, value)  # binned replicates; keep the exact value inside
    seed_ks = float(np.median(base)) if base else None
    words = (
        f"{grid.metric} increments: KS {fmt(value)} [{fmt(lo)}, {fmt(hi)}] between standardised "
        f"step-to-step changes, seed-to-seed {fmt(seed_ks)}; Wasserstein {fmt(w1)} σ"
    )
    return TestResult(
        NAME,
        value,
        float(relative(value, ref)),
        (lo, hi),
        seed_ks,
        words,
        details={
            "seed_score": seed_score(base, ref),
            "wasserstein_sigma": round(w1, 6) if np.isfinite(w1) else None,
            "seed_ks": [round(b, 4) for b in base],
            "reference_ks": round(ref, 4),
        },
        samples=relative(reps, ref),
    )
