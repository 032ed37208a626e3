"""Single change-point fits in O(n): a level step or a hinge (flat, then a linear climb).

Both are least-squares fits evaluated at every candidate split at once from cumulative sums
(the same costs as ruptures' ``CostL2`` and a continuous piecewise-linear cost), so a
20,000-point series costs a few vectorised passes. The onset of a climb is the hinge — where
the climb starts — not where it crosses a threshold.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

Kind = Literal["step", "ramp"]


@dataclass(frozen=True)
class ChangeFit:
    """The best split of one model.

    ``index`` is the first point of the new regime (a step) or the hinge (a ramp);
    ``shift`` is the fitted change from the level before to the end of the series;
    ``gain`` is the fraction of the no-change residual the model explains.
    """

    kind: Kind
    index: int
    shift: float
    sse: float
    sse_null: float

    @property
    def gain(self) -> float:
        return 1.0 - self.sse / self.sse_null if self.sse_null > 0 else 0.0


def step_fit(y: np.ndarray, *, min_points: int = 3, sign: int = 1) -> ChangeFit | None:
    """Best single level change of ``y`` (finite values), restricted to ``sign`` of the change.

    >>> y = np.r_[np.zeros(20), np.ones(10) * 5.0]
    >>> f = step_fit(y)
    >>> f.index, f.shift
    (20, 5.0)
    """
    n = y.size
    if n < 2 * min_points:
        return None
    k = np.arange(min_points, n - min_points + 1)
    c1 = np.concatenate([[0.0], np.cumsum(y)])
    total, total2 = c1[-1], float(np.dot(y, y))
    s1, s2 = c1[k], total - c1[k]
    n1, n2 = k.astype(np.float64), (n - k).astype(np.float64)
    sse = total2 - s1**2 / n1 - s2**2 / n2
    shift = s2 / n2 - s1 / n1
    if sign:
        sse = np.where(np.sign(shift) == sign, sse, np.inf)
    best = int(np.argmin(sse))
    if not np.isfinite(sse[best]):
        return None
    sse_null = total2 - total**2 / n
    return ChangeFit("step", int(k[best]), float(shift[best]), float(max(sse[best], 0.0)), float(sse_null))


def ramp_fit(
    t: np.ndarray, y: np.ndarray, *, min_points: int = 3, sign: int = 1
) -> ChangeFit | None:
    """Best hinge ``y = a + b·max(0, t - t_k)``: flat until ``t_k``, then a linear climb.

    >>> t = np.arange(40.0)
    >>> y = np.where(t < 25, 1.0, 1.0 + 0.5 * (t - 25))
    >>> f = ramp_fit(t, y)
    >>> f.index, round(f.shift, 6)
    (25, 7.0)
    """
    n = y.size
    if n < 2 * min_points:
        return None
    scale = max(float(t[-1] - t[0]), 1.0)
    tt = (t - t[0]) / scale
    k = np.arange(min_points - 1, n - min_points)
    # suffix sums from each candidate hinge (inclusive)
    def suffix(a: np.ndarray) -> np.ndarray:
        return np.cumsum(a[::-1])[::-1]

    st, st2, sy, sty = suffix(tt), suffix(tt * tt), suffix(y), suffix(tt * y)
    tk, cnt = tt[k], (n - k).astype(np.float64)
    su = st[k] - tk * cnt
    su2 = st2[k] - 2 * tk * st[k] + tk * tk * cnt
    suy = sty[k] - tk * sy[k]
    total, total2 = float(sy[0]), float(np.dot(y, y))
    det = n * su2 - su * su
    ok = det > 1e-18
    b = np.where(ok, (n * suy - su * total) / np.where(ok, det, 1.0), 0.0)
    a = (total - b * su) / n
    sse = total2 - a * total - b * suy
    shift = b * (tt[-1] - tk)
    valid = ok & ((np.sign(shift) == sign) if sign else True)
    sse = np.where(valid, sse, np.inf)
    best = int(np.argmin(sse))
    if not np.isfinite(sse[best]):
        return None
    sse_null = total2 - total**2 / n
    return ChangeFit("ramp", int(k[best]), float(shift[best]), float(max(sse[best], 0.0)), float(sse_null))


def best_change(
    t: np.ndarray, y: np.ndarray, *, min_points: int = 3, sign: int = 1
) -> ChangeFit | None:
    """The better of :func:`step_fit` and :func:`ramp_fit` (a ramp must explain clearly more
    to be preferred: both have the same number of parameters, but a ramp can mimic a step).

    >>> t = np.arange(60.0)
    >>> best_change(t, np.where(t < 30, 0.0, 4.0)).kind
    'step'
    >>> best_change(t, np.where(t < 30, 0.0, 0.2 * (t - 30))).kind
    'ramp'
    """
    step = step_fit(y, min_points=min_points, sign=sign)
    ramp = ramp_fit(t, y, min_points=min_points, sign=sign)
    if step is None or ramp is None:
        return step or ramp
    return ramp if ramp.sse < 0.9 * step.sse else step


def cusum_onset(z: np.ndarray, *, drift: float, threshold: float) -> tuple[int, int] | None:
    """One-sided CUSUM ``S_t = max(0, S_{t-1} + z_t - drift)``, vectorised.

    Returns ``(alarm, onset)``: the first index where ``S`` exceeds ``threshold`` and the last
    point after the last zero of ``S`` before it (the change-point estimate); None without alarm.

    >>> z = np.r_[np.zeros(10), np.full(10, 3.0)]
    >>> cusum_onset(z, drift=0.5, threshold=5.0)
    (12, 10)
    """
    c = np.concatenate([[0.0], np.cumsum(z - drift)])
    s = c - np.minimum.accumulate(c)
    above = np.flatnonzero(s[1:] > threshold)
    if above.size == 0:
        return None
    alarm = int(above[0])
    zeros = np.flatnonzero(s[: alarm + 1] <= 0.0)
    onset = int(zeros[-1]) if zeros.size else 0
    return alarm, onset
