"""Shape distance of the normalised curves: area between them, and banded DTW of their envelopes.

Each curve is normalised by its own median and interquartile range, so level and scale (which a
pruned proxy changes by design) drop out and only the shape remains.

* **area**: mean |difference| of the normalised, smoothed curves per grid point (IQR units); the
  bootstrap interval comes from this statistic.
* **DTW**: dynamic time warping distance (``dtaidistance``, C implementation, Sakoe-Chiba band of
  ``dtw_band_fraction`` of the length) between the normalised min/max *envelopes* at the
  analysis resolution, divided by √length (an RMS along the warping path). The band lets a
  proxy with a slightly different time constant match; the envelope keeps spikes. DTW runs at
  ``dtw_points`` (500) points: the envelope re-bucketed, min and max kept.

Each is judged against its seed baseline; the test's score is the better of the two (close
pointwise, or close after a small time warp). Non-finite points never enter a curve; their counts
are reported per run.
"""

from __future__ import annotations

from itertools import combinations, islice

import numpy as np
import numpy.typing as npt
from dtaidistance import dtw

from proxydiag.align.grid import MetricGrid
from proxydiag.align.noise import block_points_for, pseudo_seeds
from proxydiag.align.resample import minmax_downsample
from proxydiag.fidelity._scoring import fmt, reference, relative, seed_score
from proxydiag.fidelity._stats import normalise, percentile_ci
from proxydiag.fidelity.context import MetricContext
from proxydiag.fidelity.result import TestResult
from proxydiag.run import Run

Floats = npt.NDArray[np.float64]
NAME = "shape"


def area(x: Floats, y: Floats) -> float:
    """Mean |difference| of the normalised curves.

    >>> area(np.array([1.0, 2, 3, 4, 5]), np.array([10.0, 20, 30, 40, 50]))
    0.0
    """
    return float(area_rows(x, y))


def area_rows(x: Floats, y: Floats) -> Floats:
    """:func:`area` of each row of ``x`` with the same row of ``y``."""
    return np.asarray(np.mean(np.abs(normalise(x) - normalise(y)), axis=-1), dtype=np.float64)


def dtw_distance(x: Floats, y: Floats, *, band_fraction: float) -> float:
    """Banded DTW of the normalised finite points, per √point.

    >>> round(
    ...     dtw_distance(
    ...         np.array([0.0, 1, 2, 3, 2, 1]), np.array([0.0, 0, 1, 2, 3, 2]), band_fraction=0.5
    ...     ),
    ...     3,
    ... )
    0.534
    """
    x, y = normalise(x[np.isfinite(x)]), normalise(y[np.isfinite(y)])
    if x.size < 2 or y.size < 2:
        return float("nan")
    window = max(2, round(band_fraction * max(x.size, y.size))) + abs(x.size - y.size)
    d = dtw.distance_fast(
        np.ascontiguousarray(x), np.ascontiguousarray(y), window=window, use_pruning=True
    )
    return float(d / np.sqrt(max(x.size, y.size)))


def score(full_runs: list[Run], proxy: Run, grid: MetricGrid, *, ctx: MetricContext) -> TestResult:
    """Area and DTW against their seed baselines."""
    cfg = ctx.config
    za, zb = normalise(ctx.smooth_a), normalise(ctx.smooth_b)
    value = float(np.mean(np.abs(za - zb)))
    base = ctx.on_pairs(area_rows, smoothed=True)
    ref = reference(base, floor=cfg.floor_shape)
    reps = np.abs(za - zb)[ctx.boot].mean(axis=1)
    env = [minmax_downsample(e, max_points=cfg.dtw_points) for e in grid.envelope]
    d_dtw = dtw_distance(env[0], env[grid.n_full], band_fraction=cfg.dtw_band_fraction)
    base_dtw = _baseline_dtw(grid, env, ctx)
    ref_dtw = reference(base_dtw, floor=cfg.floor_shape)
    s_dtw = float(relative(d_dtw, ref_dtw))
    samples = np.maximum(relative(reps, ref), s_dtw)
    lo, hi = percentile_ci(reps, level=cfg.ci_level)
    seed_area = float(np.median(base)) if base else None
    nf_full, nf_proxy = int(grid.n_nonfinite[0]), int(grid.n_nonfinite[grid.n_full])
    words = (
        f"{grid.metric} shape: area {fmt(value)} [{fmt(lo)}, {fmt(hi)}] IQR units, "
        f"seed-to-seed {fmt(seed_area)}; DTW {fmt(d_dtw)}, seed-to-seed "
        f"{fmt(float(np.median(base_dtw)) if base_dtw else None)}; non-finite points "
        f"full {nf_full}, proxy {nf_proxy} (not in the curves)"
    )
    return TestResult(
        NAME,
        value,
        max(float(relative(value, ref)), s_dtw),
        (lo, hi),
        seed_area,
        words,
        details={
            "area": round(value, 6),
            "seed_areas": [round(b, 4) for b in base],
            "seed_score": seed_score(base, ref),
            "dtw": round(d_dtw, 6) if np.isfinite(d_dtw) else None,
            "seed_dtw": [round(b, 4) for b in base_dtw],
            "reference_area": round(ref, 4),
            "reference_dtw": round(ref_dtw, 4),
            "nonfinite_full": nf_full,
            "nonfinite_proxy": nf_proxy,
            "points": int(ctx.a.size),
        },
        samples=samples,
    )


def _baseline_dtw(grid: MetricGrid, env: list[Floats], ctx: MetricContext) -> list[float]:
    """DTW between the seeds' envelopes; with one seed, between pseudo-seeds of its envelope
    (trend + circular block bootstrap of the envelope's residuals, as for the curves)."""
    cfg = ctx.config
    band = cfg.dtw_band_fraction
    if grid.n_full >= 2:
        pairs = islice(combinations(range(grid.n_full), 2), 6)  # compute only the 6 kept
        return [dtw_distance(env[i], env[j], band_fraction=band) for i, j in pairs]
    rng = np.random.default_rng(grid.buckets)  # deterministic for a given grid
    block = 2 * block_points_for(env[0].size // 2, smooth_points=1)
    seeds = pseudo_seeds(
        env[0], n=4, trend_fraction=cfg.trend_fraction, block_points=block, rng=rng
    )
    return [dtw_distance(seeds[k], seeds[k + 1], band_fraction=band) for k in (0, 2)]
