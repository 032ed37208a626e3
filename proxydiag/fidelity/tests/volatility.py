"""Volatility: the robust spread (MAD, as σ) of step-to-step changes, as a proxy/full ratio.

Changes are taken between consecutive grid points where both runs are finite (one logged point
per bucket, so runs logged every step and every 10 steps compare at equal spacing), on log scale
for positive scale-like metrics (grad norm, loss scale, or any positive metric whose full run
spans a decade: relative changes), as differences otherwise (reward, entropy: a lower level
must not look like a larger relative noise). The bootstrap replicates of the spread use
256 quantile bins of the absolute deviations (vectorised; exact to within a bin). The discrepancy is
``|log(ratio)|``, judged against seed pairs.
"""

from __future__ import annotations

from functools import partial

import numpy as np
import numpy.typing as npt

from proxydiag.align.grid import MetricGrid
from proxydiag.fidelity._scoring import fmt, reference, relative, seed_score
from proxydiag.fidelity._stats import binned_sigma, increments, percentile_ci, robust_sigma
from proxydiag.fidelity.context import MetricContext
from proxydiag.fidelity.result import TestResult
from proxydiag.run import Run

Floats = npt.NDArray[np.float64]
NAME = "volatility"


def log_ratio(x: Floats, y: Floats, *, log_scale: bool) -> float:
    """``log(σ(Δy) / σ(Δx))`` (0 when both are flat, ±inf when one is).

    >>> round(
    ...     log_ratio(np.array([0.0, 1, 0, 1, 0]), np.array([0.0, 2, 0, 2, 0]), log_scale=False),
    ...     4,
    ... )
    0.6931
    """
    return float(log_ratios(x, y, log_scale=log_scale))


def log_ratios(x: Floats, y: Floats, *, log_scale: bool) -> Floats:
    """:func:`log_ratio` of each row of ``x`` with the same row of ``y``."""
    sx = robust_sigma(increments(x, log_scale=log_scale))
    sy = robust_sigma(increments(y, log_scale=log_scale))
    return _log_ratio(sy, sx)


def _log_ratio(num: Floats, den: Floats) -> Floats:
    # a difference of logs: a ratio of subnormal spreads would overflow before its log
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.log(num) - np.log(den)
    return np.asarray(np.where((num == 0) & (den == 0), 0.0, out), dtype=np.float64)


def score(full_runs: list[Run], proxy: Run, grid: MetricGrid, *, ctx: MetricContext) -> TestResult:
    """Ratio of the proxy's to the full run's increment spread, against the seed baseline."""
    cfg, log_scale = ctx.config, grid.log_scale
    value = log_ratio(ctx.a, ctx.b, log_scale=log_scale)
    base = [abs(r) for r in ctx.on_pairs(partial(log_ratios, log_scale=log_scale))]
    ref = reference(base, floor=cfg.floor_volatility)
    da, db = increments(ctx.a, log_scale=log_scale), increments(ctx.b, log_scale=log_scale)
    idx = np.minimum(ctx.boot, da.size - 1)
    reps = _log_ratio(binned_sigma(db, idx), binned_sigma(da, idx))
    lo, hi = percentile_ci(np.exp(reps), level=cfg.ci_level)
    seed_ratio = float(np.exp(np.median(base))) if base else None
    scale = "log-scale changes" if log_scale else "changes"
    words = (
        f"{grid.metric} volatility: proxy/full spread of step-to-step {scale} "
        f"{fmt(float(np.exp(value)))} [{fmt(lo)}, {fmt(hi)}], seed-to-seed within "
        f"×{fmt(seed_ratio)}"
    )
    return TestResult(
        NAME,
        float(np.exp(value)),
        float(relative(abs(value), ref)),
        (lo, hi),
        seed_ratio,
        words,
        details={
            "log_scale": log_scale,
            "seed_score": seed_score(base, ref),
            "seed_abs_log_ratios": [round(b, 4) for b in base],
            "reference_abs_log_ratio": round(ref, 4),
        },
        samples=relative(np.abs(reps), ref),
    )
