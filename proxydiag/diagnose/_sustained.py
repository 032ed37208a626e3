"""A sustained change of one series: where it starts, its shape, and how large it is.

Shared by the divergence and mismatch detectors: smooth with a short centred median (isolated
spikes do not move the fit), locate the single best step or hinge (:mod:`._changepoint`), and
measure the level after the change against the level before it in robust σ.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from proxydiag.diagnose._changepoint import best_change
from proxydiag.diagnose._stats import noise_sigma, robust_level, rolling_median


@dataclass(frozen=True)
class Change:
    """``index`` is the first point of the change; levels are in the transformed space."""

    index: int
    kind: str  # "step" or "ramp"
    before: float
    after: float
    sigma: float

    @property
    def rise(self) -> float:
        return self.after - self.before

    @property
    def z(self) -> float:
        return abs(self.rise) / self.sigma


def sustained_change(
    t: np.ndarray,
    y: np.ndarray,
    *,
    sign: int,
    after: Literal["tail", "peak"] = "tail",
    tail_fraction: float = 0.1,
    baseline_points: int | None = None,
    sigma_floor: float = 1e-3,
    log_scale: bool = False,
) -> Change | None:
    """The best single change of ``y`` (finite, in the direction ``sign``) and its size.

    ``after="tail"`` measures the level at the end of the series (a change that reverted
    measures small); ``"peak"`` the most extreme sustained level after the change.
    ``baseline_points`` fixes the level before to the run's own early baseline.
    ``log_scale``: ``y`` is a log; the change is also located on the linear scale and the
    better-explained fit wins (a linear climb is concave on log scale, which biases a hinge
    early; an exponential one is a straight line on log scale).

    >>> t = np.arange(100.0)
    >>> rng = np.random.default_rng(1)
    >>> y = rng.normal(0, 0.1, 100) + np.where(t < 60, 0.0, 0.05 * (t - 60))
    >>> c = sustained_change(t, y, sign=1)
    >>> c.kind, abs(c.index - 60) <= 4, c.z > 6
    ('ramp', True, True)
    """
    n = y.size
    if n < 8:
        return None
    smooth_w = 5 if n >= 40 else 3
    ys = rolling_median(y, window_points=smooth_w, center=True)
    min_points = max(3, n // 100)
    fit = best_change(t, ys, min_points=min_points, sign=sign)
    if log_scale:
        lin = best_change(t, np.exp(ys - np.nanmedian(ys)), min_points=min_points, sign=sign)
        if fit is None or (lin is not None and lin.gain > fit.gain):
            fit = lin
    if fit is None:
        return None
    k = fit.index
    base = y[: baseline_points if baseline_points else k]
    before, spread = robust_level(base)
    sigma = max(spread, noise_sigma(base), sigma_floor)
    level_w = max(3, int(tail_fraction * n))
    if after == "tail":
        level = float(np.median(y[-level_w:]))
    else:
        rolled = rolling_median(y[k:], window_points=level_w, center=True)
        level = float(np.nanmax(rolled) if sign > 0 else np.nanmin(rolled))
    return Change(k, fit.kind, before, level, sigma)
