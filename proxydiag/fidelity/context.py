"""`MetricContext`: what every test gets for one metric: the aligned pair, the baseline and the
shared bootstrap resamples (one set per metric, so the metric's score has a joint interval)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from proxydiag.align.grid import MetricGrid
from proxydiag.align.noise import Baseline, baseline, block_points_for, circular_block_indices
from proxydiag.align.smooth import smooth, window_for
from proxydiag.fidelity.config import FidelityConfig

Floats = npt.NDArray[np.float64]


@dataclass(frozen=True)
class MetricContext:
    """The reference full run (row 0) and the proxy on the positions where both are finite.

    ``boot`` holds ``n_boot`` circular-block-bootstrap resamples of those positions (indices into
    ``a``/``b``); a test's replicates use exactly these rows. ``pair_rows`` and
    ``smooth_pair_rows`` hold the baseline pairs (raw, and as :meth:`smoothed` sees them) on
    their common finite positions, pairs that share those positions stacked as one
    (pairs × points) array, so a test computes its statistic on every pair at once
    (:meth:`on_pairs`).
    """

    metric: str
    a: Floats  # reference full run, compressed to common finite positions
    b: Floats  # proxy
    smooth_a: Floats  # smoothed (on log scale for log-scale metrics), for trend and shape
    smooth_b: Floats
    positions: npt.NDArray[np.int64]  # grid positions of a/b
    baseline: Baseline
    boot: npt.NDArray[np.int64]
    smooth_points: int
    config: FidelityConfig
    log_scale: bool = False
    pair_rows: tuple[PairRows, ...] = ()
    smooth_pair_rows: tuple[PairRows, ...] = ()

    def smoothed(self, curve: Floats) -> Floats:
        """A curve as trend and shape see it: on log scale for log-scale metrics, smoothed
        (row by row for a 2-D array)."""
        return smooth(np.log(curve) if self.log_scale else curve, window_points=self.smooth_points)

    def on_pairs(
        self, statistic: Callable[[Floats, Floats], Floats], *, smoothed: bool = False
    ) -> list[float]:
        """``statistic`` of every baseline pair, in the pairs' order; ``statistic`` takes two
        (pairs × points) arrays and returns one value per row."""
        out = [float("nan")] * len(self.baseline.pairs)
        for rows in self.smooth_pair_rows if smoothed else self.pair_rows:
            for i, value in zip(rows.index, statistic(rows.x, rows.y), strict=True):
                out[i] = float(value)
        return out


@dataclass(frozen=True)
class PairRows:
    """Baseline pairs ``index`` on the finite positions they share, one row a pair."""

    index: tuple[int, ...]
    x: Floats
    y: Floats


def pair_rows(pairs: Sequence[tuple[Floats, Floats]]) -> tuple[PairRows, ...]:
    """The pairs on the positions where both curves of a pair are finite, pairs sharing those
    positions stacked together.

    >>> x = np.array([1.0, 2, 3])
    >>> rows = pair_rows([(x, x), (x, x + 1), (x, np.array([1.0, np.nan, 3]))])
    >>> [(r.index, r.x.shape) for r in rows]
    [((0, 1), (2, 3)), ((2,), (1, 2))]
    """
    keeps = [np.isfinite(x) & np.isfinite(y) for x, y in pairs]
    groups: dict[bytes, list[int]] = {}
    for i, keep in enumerate(keeps):
        groups.setdefault(keep.tobytes(), []).append(i)
    return tuple(
        PairRows(
            tuple(idx),
            np.stack([pairs[i][0][keeps[i]] for i in idx]),
            np.stack([pairs[i][1][keeps[i]] for i in idx]),
        )
        for idx in groups.values()
    )


def metric_context(
    grid: MetricGrid, *, config: FidelityConfig, rng: np.random.Generator
) -> MetricContext:
    """Build the context of one metric (baseline and bootstrap drawn from ``rng``)."""
    smooth_points = window_for(grid.buckets, fraction=config.smooth_fraction)
    block = block_points_for(grid.buckets, smooth_points=smooth_points)
    ref, proxy = grid.sample[0], grid.proxy
    positions = np.flatnonzero(np.isfinite(ref) & np.isfinite(proxy))
    pair = np.vstack([ref, proxy])
    smoothed = smooth(np.log(pair) if grid.log_scale else pair, window_points=smooth_points)
    # pseudo-seeds of a log-scale metric are made on log scale, so they stay positive
    full = np.log(grid.full) if grid.log_scale else grid.full
    base = baseline(
        full,
        n_pseudo_seeds=config.n_pseudo_seeds,
        trend_fraction=config.trend_fraction,
        block_points=block,
        rng=rng,
    )
    if grid.log_scale:
        base = Baseline(
            base.kind, tuple((np.exp(x), np.exp(y)) for x, y in base.pairs), base.description
        )
    boot = circular_block_indices(positions.size, n_rows=config.n_boot, block_points=block, rng=rng)
    curves = np.array([c for pair in base.pairs for c in pair]).reshape(-1, ref.size)
    smooth_curves = smooth(
        np.log(curves) if grid.log_scale else curves, window_points=smooth_points
    )
    smooth_pairs = [
        (smooth_curves[2 * k], smooth_curves[2 * k + 1]) for k in range(len(base.pairs))
    ]
    return MetricContext(
        metric=grid.metric,
        a=ref[positions],
        b=proxy[positions],
        smooth_a=smoothed[0, positions],
        smooth_b=smoothed[1, positions],
        positions=positions,
        baseline=base,
        boot=boot,
        smooth_points=smooth_points,
        config=config,
        log_scale=grid.log_scale,
        pair_rows=pair_rows(base.pairs),
        smooth_pair_rows=pair_rows(smooth_pairs),
    )
