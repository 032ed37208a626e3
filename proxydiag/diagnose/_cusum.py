"""A one-sided CUSUM (Page's test) on a series, calibrated on the series' own noise.

Each point is standardised against a causal reference that ends :data:`GUARD_POINTS` before
it (so a change does not pull its own baseline along at once): the level is the least-squares
line of its last :data:`REF_POINTS` points carried to the point judged when the trend is
significant (a learning run's reward rises and its entropy falls: the level is where the run
is now, not where it was), the σ the larger of the spread about that line and the
point-to-point noise (differences, so a steady trend is not counted as noise). Running sums
make it O(n) a series, cheap enough for the live guard's every re-fit; the statistic caps
each point's share, so a spike in the reference costs sensitivity, never a false alarm.
The statistic is

    S_i = max(0, S_{i-1} + min(z_i, Z_CAP) - DRIFT),   z_i = sign · (y_i - μ) / σ

and the reference is frozen while S is above zero (an excursion is measured against the level
it left) and for :data:`HOLD_POINTS` points after it ends (a change that flickers back for a
point is still measured against the level it left), unless the excursion lasts
:data:`REF_POINTS` points without an alarm (a slow wander, or a reference that was off: it
starts again from a fresh one). One spike adds at
most ``Z_CAP - DRIFT``: it takes a few points well out of range, or many slightly out, to
cross :data:`THRESHOLD`. Everything here reads points up to ``i``
only, so a statistic computed on a live prefix equals the one computed later on the whole run.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

#: points of the reference noise (before the guard)
REF_POINTS = 24
#: a reference's trend is carried to the point judged when its slope stands this many standard
#: errors clear of zero (else the reference is flat: its mean)
TREND_T = 3.0
#: points between the reference and the point judged
GUARD_POINTS = 3
#: points after an excursion ends during which its reference is kept
HOLD_POINTS = 6
#: fewest reference points a point is judged against
MIN_REF_POINTS = 8
#: allowance per point, in σ (the shift the test is tuned for is 2 × DRIFT; the reference
#: is estimated, so a smaller one lets its error accumulate on healthy runs)
DRIFT = 2.0
#: the most one point adds, in σ
Z_CAP = 8.0
#: the statistic's alarm level, in σ
THRESHOLD = 12.0


@dataclass(frozen=True)
class Excursion:
    """The statistic above zero from ``start`` (index) to ``end`` (last index), with the
    reference it was measured against; ``alarm`` is the first index where it crossed the
    threshold, ``confirmed`` the first from which the change also stood past the gate on two
    points in a row (None: it never did)."""

    start: int
    end: int
    alarm: int | None
    confirmed: int | None
    level: float
    sigma: float


def cusum(
    y: np.ndarray,
    *,
    sign: int,
    begin: int = 0,
    sigma_floor: float = 1e-9,
    gate: Callable[[float], float] | None = None,
) -> tuple[np.ndarray, list[Excursion]]:
    """The statistic at each point of ``y`` (finite values, in the direction ``sign``) and its
    excursions. Points before ``begin`` only serve as reference. ``gate(level)`` is how far
    past the level the change must stand to count (default: no gate); an excursion that has
    not crossed the threshold and stood past the gate within :data:`REF_POINTS` points is a
    slow wander, not a change: it ends, and the next point is measured against a fresh
    reference (so a run's slow learning trends never add up to an alarm).

    >>> rng = np.random.default_rng(0)
    >>> y = np.r_[rng.normal(0, 1, 80), rng.normal(6, 1, 10)]
    >>> s, exc = cusum(y, sign=1)
    >>> float(s[:80].max()) < THRESHOLD, [e.alarm for e in exc if e.alarm is not None]
    (True, [84])
    """
    n = y.size
    s = np.zeros(n)
    excursions: list[Excursion] = []
    total, start = 0.0, -1
    alarm: int | None = None
    confirmed: int | None = None
    level = sigma = need = float("nan")
    first = max(begin, MIN_REF_POINTS + GUARD_POINTS)
    levels, sigmas = _references(y, first)
    held_until = -1  # the reference of an excursion that just ended is held until here
    for i in range(first, n):
        if total <= 0.0 and i > held_until:
            level, sigma = float(levels[i]), max(float(sigmas[i]), sigma_floor)
        z = min(sign * (float(y[i]) - level) / sigma, Z_CAP)
        step = total + z - DRIFT
        if step > 0.0 and confirmed is None and total > 0.0 and i - start >= REF_POINTS:
            excursions.append(Excursion(start, i - 1, alarm, None, level, sigma))
            total, step = 0.0, 0.0
        if step > 0.0:
            if total <= 0.0:
                start, alarm, confirmed = i, None, None
                need = gate(level) if gate is not None else 0.0
            total = step
            if alarm is None and total >= THRESHOLD:
                alarm = i
            if (
                confirmed is None
                and alarm is not None
                and i > start
                and sign * (float(y[i]) - level) >= need
                and sign * (float(y[i - 1]) - level) >= need
            ):
                confirmed = i
        else:
            if total > 0.0:
                excursions.append(Excursion(start, i - 1, alarm, confirmed, level, sigma))
                # a change that flickers back for a point or two is still measured against
                # the level it left, not against a reference that now holds part of it
                held_until = i + HOLD_POINTS
            total = 0.0
        s[i] = total
    if total > 0.0:
        excursions.append(Excursion(start, n - 1, alarm, confirmed, level, sigma))
    return s, excursions


def _references(y: np.ndarray, first: int) -> tuple[np.ndarray, np.ndarray]:
    """For each point ``i`` from ``first`` on, the reference level and σ it is judged
    against, for all points at once from running sums (O(n)): the least-squares line of the
    window ``y[i - GUARD_POINTS - REF_POINTS : i - GUARD_POINTS]`` (shorter at the start of
    the series) carried to ``i`` (its slope kept only when it stands :data:`TREND_T` standard
    errors clear of zero), and the larger of the residual spread about that line and the
    window's point-to-point noise."""
    n = y.size
    levels, sigmas = np.full(n, np.nan), np.full(n, np.nan)
    i = np.arange(first, n)
    if not i.size:
        return levels, sigmas
    end = i - GUARD_POINTS
    start = np.maximum(0, end - REF_POINTS)
    m = (end - start).astype(np.float64)
    j = np.arange(n, dtype=np.float64)
    cy, cxy, cyy = (np.r_[0.0, np.cumsum(v)] for v in (y, j * y, y * y))
    sy, syy = cy[end] - cy[start], cyy[end] - cyy[start]
    sxy = cxy[end] - cxy[start] - start * sy  # x counted from the window's start
    sx = m * (m - 1) / 2.0
    sxx = (m - 1) * m * (2 * m - 1) / 6.0
    var_x = sxx - sx * sx / m
    slope = (sxy - sx * sy / m) / var_x
    intercept = (sy - slope * sx) / m
    ssr = np.maximum(syy - intercept * sy - slope * sxy, 0.0)
    resid = np.sqrt(ssr / np.maximum(m - 2, 1.0))
    flat = np.abs(slope) * np.sqrt(var_x) < TREND_T * np.maximum(resid, 1e-300)
    # a window without a trend: its mean and spread about it
    mean = sy / m
    spread = np.sqrt(np.maximum(syy / m - mean * mean, 0.0) * m / np.maximum(m - 1, 1.0))
    level = np.where(flat, mean, intercept + slope * (m - 1 + GUARD_POINTS + 1))
    resid = np.where(flat, spread, resid)
    # point-to-point noise: the spread of the window's successive differences / sqrt(2)
    d = np.diff(y)
    cd, cdd = (np.r_[0.0, np.cumsum(v)] for v in (d, d * d))
    k = np.maximum(m - 1, 1.0)
    dmean = (cd[end - 1] - cd[start]) / k
    dvar = np.maximum((cdd[end - 1] - cdd[start]) / k - dmean * dmean, 0.0)
    noise = np.sqrt(dvar / 2.0)
    levels[first:], sigmas[first:] = level, np.maximum(resid, noise)
    return levels, sigmas
