"""The seed-noise baseline: what "indistinguishable from another seed" means for one metric.

With two or more full seeds, every pair of seeds is a baseline pair: a test's statistic between
seeds is the noise a proxy is judged against. With one seed, pseudo-seeds stand in for the
missing ones: the full run's curve is split into a smooth trend (moving average over
``trend_fraction`` of the run) and residuals; each pseudo-seed is the trend plus a *circular
block bootstrap* of the residuals (blocks of ``max(n^(1/3), smoothing window)`` points keep
their autocorrelation), and consecutive pseudo-seeds form the baseline pairs. Pseudo-seeds share
the trend exactly, so they understate seed-to-seed trend variation; the tests' noise floors
(:class:`~proxydiag.fidelity.config.FidelityConfig`) cover that.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations

import numpy as np
import numpy.typing as npt

from proxydiag.align.smooth import smooth, window_for

Floats = npt.NDArray[np.float64]

#: at most this many seed pairs (10 seeds give 45; the baseline needs a handful)
MAX_PAIRS = 12


@dataclass(frozen=True)
class Baseline:
    """Baseline pairs of curves on the grid, and how they were made."""

    kind: str  # "seeds" | "bootstrap"
    pairs: tuple[tuple[Floats, Floats], ...]
    description: str


def baseline(
    full: Floats,
    *,
    n_pseudo_seeds: int,
    trend_fraction: float,
    block_points: int,
    rng: np.random.Generator,
) -> Baseline:
    """Baseline pairs from the full runs' curves ``full`` (seeds × points).

    >>> rng = np.random.default_rng(0)
    >>> b = baseline(rng.normal(size=(1, 200)), n_pseudo_seeds=4, trend_fraction=0.1,
    ...              block_points=5, rng=rng)
    >>> b.kind, len(b.pairs), b.pairs[0][0].shape
    ('bootstrap', 2, (200,))
    """
    n_seeds = full.shape[0]
    if n_seeds >= 2:
        pairs = tuple((full[i], full[j]) for i, j in combinations(range(n_seeds), 2))[:MAX_PAIRS]
        return Baseline("seeds", pairs, f"{n_seeds} full seeds ({len(pairs)} seed pairs)")
    seeds = pseudo_seeds(
        full[0], n=n_pseudo_seeds, trend_fraction=trend_fraction, block_points=block_points, rng=rng
    )
    pairs = tuple((seeds[k], seeds[k + 1]) for k in range(0, seeds.shape[0] - 1, 2))
    return Baseline(
        "bootstrap",
        pairs,
        f"1 full seed: {seeds.shape[0]} pseudo-seeds by block bootstrap of its residuals "
        f"(blocks of {block_points} points)",
    )


def pseudo_seeds(
    curve: Floats, *, n: int, trend_fraction: float, block_points: int, rng: np.random.Generator
) -> Floats:
    """``n`` pseudo-seeds of ``curve``: trend + block-bootstrapped residuals (NaN gaps kept)."""
    trend = smooth(curve, window_points=window_for(curve.size, fraction=trend_fraction))
    finite = np.isfinite(curve)
    residuals = (curve - trend)[finite]
    out = np.tile(curve, (n, 1))
    if residuals.size:
        idx = circular_block_indices(residuals.size, n_rows=n, block_points=block_points, rng=rng)
        out[:, finite] = trend[finite] + residuals[idx]
    return out


def circular_block_indices(
    n: int, *, n_rows: int, block_points: int, rng: np.random.Generator
) -> npt.NDArray[np.int64]:
    """``n_rows`` × ``n`` indices: random blocks of ``block_points`` consecutive positions
    (wrapping around), the circular block bootstrap of Politis & Romano (1992).

    >>> circular_block_indices(6, n_rows=1, block_points=3, rng=np.random.default_rng(1)).shape
    (1, 6)
    """
    block_points = max(1, min(int(block_points), n))
    n_blocks = -(-n // block_points)
    starts = rng.integers(0, n, size=(n_rows, n_blocks))
    idx = (starts[:, :, None] + np.arange(block_points)).reshape(n_rows, -1)[:, :n]
    return np.where(idx >= n, idx - n, idx)  # wrap around (start < n, offset < n: one turn)


def block_points_for(n_points: int, *, smooth_points: int) -> int:
    """Block length: ``n^(1/3)`` (Hall, Horowitz & Jing 1995) but at least the smoothing window,
    so a block spans the autocorrelation the smoothing creates.

    >>> block_points_for(1000, smooth_points=5)
    10
    """
    cube_root: int = round(float(n_points) ** (1 / 3))
    return max(cube_root, int(smooth_points), 1)
