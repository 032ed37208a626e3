"""Trend agreement: Spearman rank correlation of the smoothed aligned curves, plus the direction
and rate of change of each run.

Rank correlation asks whether the proxy rises and falls where the full run does, whatever its
level and scale (a pruned proxy learns less by design); it is what prior work uses to judge small
proxies (rank agreement rather than curve distance). The discrepancy is ``1 - rho``, judged
against the same between seeds. Direction and rate: the change from the first to the last fifth of
the run in units of the run's own noise σ, and the progress at which half of it is reached. Two
runs that both change significantly but in opposite directions score 0 (unless two seeds do too).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from proxydiag.align.grid import MetricGrid
from proxydiag.align.smooth import smooth, window_for
from proxydiag.fidelity._scoring import fmt, reference, relative, seed_score
from proxydiag.fidelity._stats import percentile_ci, ranks, robust_sigma, row_pearson
from proxydiag.fidelity.context import MetricContext
from proxydiag.fidelity.result import TestResult
from proxydiag.run import Run

Floats = npt.NDArray[np.float64]
NAME = "trend"


@dataclass(frozen=True)
class Change:
    """Net change of one curve: from the first to the last fifth, in its own noise σ."""

    delta: float
    sigma: float
    half_progress: float | None  # progress where the smoothed curve is halfway

    @property
    def z(self) -> float:
        return self.delta / self.sigma if self.sigma > 0 else (0.0 if self.delta == 0 else np.inf)


def spearman(x: Floats, y: Floats) -> float:
    """Spearman's rho of two equally long curves (1 when both are constant).

    >>> spearman(np.array([1.0, 2, 3, 4]), np.array([1.0, 3, 2, 4]))
    0.8
    """
    return float(spearman_rows(x, y))


def spearman_rows(x: Floats, y: Floats) -> Floats:
    """Spearman's rho of each row of ``x`` with the same row of ``y``."""
    return row_pearson(ranks(x), ranks(y))


def change(curve: Floats, *, trend_fraction: float) -> Change:
    """The net change of a grid curve (NaN gaps ignored)."""
    f = curve[np.isfinite(curve)]
    if f.size < 4:
        return Change(0.0, 0.0, None)
    k = max(2, f.size // 5)
    start, end = float(np.median(f[:k])), float(np.median(f[-k:]))
    trend = smooth(f, window_points=window_for(f.size, fraction=trend_fraction))
    sigma = float(robust_sigma(f - trend))
    halfway = np.flatnonzero((trend - start) * np.sign(end - start) >= abs(end - start) / 2)
    half = float(halfway[0] / (f.size - 1)) if end != start and halfway.size else None
    return Change(end - start, sigma, half)


def score(full_runs: list[Run], proxy: Run, grid: MetricGrid, *, ctx: MetricContext) -> TestResult:
    """Spearman of the smoothed curves against the seed baseline; direction and rate."""
    cfg = ctx.config
    ra, rb = ranks(ctx.smooth_a), ranks(ctx.smooth_b)
    rho = float(row_pearson(ra, rb))
    base = ctx.on_pairs(spearman_rows, smoothed=True)
    ref = reference([1 - r for r in base], floor=cfg.floor_trend)
    reps = row_pearson(ra[ctx.boot], rb[ctx.boot])
    c_full = change(grid.sample[0], trend_fraction=cfg.trend_fraction)
    c_proxy = change(grid.proxy, trend_fraction=cfg.trend_fraction)
    opposite = _opposite(c_full, c_proxy, cfg.learn_min_sigma) and not any(
        _opposite(
            change(x, trend_fraction=cfg.trend_fraction),
            change(y, trend_fraction=cfg.trend_fraction),
            cfg.learn_min_sigma,
        )
        for x, y in ctx.baseline.pairs
    )  # seeds that disagree on the direction excuse the proxy
    value_score = 0.0 if opposite else float(relative(1 - rho, ref))
    samples = np.zeros_like(reps) if opposite else relative(1 - reps, ref)
    seed_rho = float(np.median(base)) if base else None
    lo, hi = percentile_ci(reps, level=cfg.ci_level)
    words = (
        f"{grid.metric} trend: Spearman {fmt(rho)} [{fmt(lo)}, {fmt(hi)}], "
        f"seed-to-seed {fmt(seed_rho)}; change full {_z(c_full)}σ, proxy {_z(c_proxy)}σ"
    )
    if opposite:
        words += "; the runs move in opposite directions"
    return TestResult(
        NAME,
        rho,
        value_score,
        (lo, hi),
        seed_rho,
        words,
        details={
            "seed_rhos": [round(r, 4) for r in base],
            "seed_score": seed_score([1 - r for r in base], ref),
            "reference_discrepancy": round(ref, 4),
            "change_full": round(c_full.delta, 6),
            "change_proxy": round(c_proxy.delta, 6),
            "change_sigma_full": round(c_full.z, 3) if np.isfinite(c_full.z) else None,
            "change_sigma_proxy": round(c_proxy.z, 3) if np.isfinite(c_proxy.z) else None,
            "half_progress_full": c_full.half_progress,
            "half_progress_proxy": c_proxy.half_progress,
            "opposite_direction": bool(opposite),
        },
        samples=samples,
    )


def _opposite(a: Change, b: Change, min_sigma: float) -> bool:
    """Both change significantly, in opposite directions."""
    return abs(a.z) >= min_sigma and abs(b.z) >= min_sigma and np.sign(a.delta) != np.sign(b.delta)


def _z(c: Change) -> str:
    return f"{c.z:+.1f}" if np.isfinite(c.z) else "∞"
