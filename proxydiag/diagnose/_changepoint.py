"""Single change-point fits in O(n): a level step or a hinge (flat, then a linear climb).

Both are least-squares fits evaluated at every candidate split at once from cumulative sums
(the same costs as ruptures' ``CostL2`` and a continuous piecewise-linear cost), so a
20,000-point series costs a few vectorised passes; the sums are computed once per series
and shared by the fits (:class:`_Sums`). The onset of a climb is the hinge — where
the climb starts — not where it crosses a threshold.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
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
    #: which fit found it: "step", "hinge" or "jump_ramp"
    model: str = "step"

    @property
    def gain(self) -> float:
        return 1.0 - self.sse / self.sse_null if self.sse_null > 0 else 0.0


class _Sums:
    """The sums of one series the fits share, each group computed once on first use
    (:func:`best_change` runs three fits on the same series).

    ``prefix``: sums of ``y`` and ``y²`` before each index ``0..n``, and ``y·y``.
    ``suffix``: the time axis scaled to [0, 1] (better conditioned), and the sums of ``tt``,
    ``tt²``, ``y``, ``tt·y``, ``y²`` from each index ``0..n`` (so ending in 0).
    """

    def __init__(self, t: np.ndarray | None, y: np.ndarray) -> None:
        self.t, self.y, self.n = t, y, y.size

    @cached_property
    def prefix(self) -> tuple[np.ndarray, np.ndarray, float]:
        y = self.y
        c1, c2 = np.concatenate([[0.0], np.cumsum(y)]), np.concatenate([[0.0], np.cumsum(y * y)])
        return c1, c2, float(np.dot(y, y))

    @cached_property
    def suffix(self) -> tuple[np.ndarray, ...]:
        t, y = self.t, self.y
        assert t is not None, "the hinge fits need the time axis"
        tt = (t - t[0]) / max(float(t[-1] - t[0]), 1.0)
        return tt, *(_suffix(a) for a in (tt, tt * tt, y, tt * y, y * y))


def _suffix(a: np.ndarray) -> np.ndarray:
    """``out[k] = sum(a[k:])`` for ``k`` in ``0..n``, accumulated from the end."""
    return np.concatenate([np.cumsum(a[::-1])[::-1], [0.0]])


Model = Callable[[_Sums, np.ndarray, int], ChangeFit | None]


def _fit(model: Model, s: _Sums, *, min_points: int, sign: int) -> ChangeFit | None:
    """``model`` fitted at every candidate index ``k`` of the new regime's first point that
    leaves ``min_points`` points on either side; None when the series is too short."""
    if s.n < 2 * min_points:
        return None
    return model(s, np.arange(min_points, s.n - min_points + 1), sign)


def _least(sse: np.ndarray, valid: np.ndarray | bool) -> int | None:
    """The candidate of least ``sse`` among the ``valid`` ones; None when none is finite."""
    masked = np.where(valid, sse, np.inf)
    best = int(np.argmin(masked))
    return best if np.isfinite(masked[best]) else None


def step_fit(y: np.ndarray, *, min_points: int = 3, sign: int = 1) -> ChangeFit | None:
    """Best single level change of ``y`` (finite values), restricted to ``sign`` of the change.

    >>> y = np.r_[np.zeros(20), np.ones(10) * 5.0]
    >>> f = step_fit(y)
    >>> f.index, f.shift
    (20, 5.0)
    """
    return _fit(_step_fit, _Sums(None, y), min_points=min_points, sign=sign)


def _step_fit(s: _Sums, k: np.ndarray, sign: int) -> ChangeFit | None:
    n = s.n
    c1, _, total2 = s.prefix
    total = c1[-1]
    s1, s2 = c1[k], total - c1[k]
    n1, n2 = k.astype(np.float64), (n - k).astype(np.float64)
    sse = total2 - s1**2 / n1 - s2**2 / n2
    shift = s2 / n2 - s1 / n1
    best = _least(sse, (np.sign(shift) == sign) if sign else True)
    if best is None:
        return None
    sse_null = total2 - total**2 / n
    return ChangeFit(
        "step", int(k[best]), float(shift[best]), float(max(sse[best], 0.0)), float(sse_null)
    )


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
    return _fit(_ramp_fit, _Sums(t, y), min_points=min_points, sign=sign)


def _ramp_fit(s: _Sums, k: np.ndarray, sign: int) -> ChangeFit | None:
    n = s.n
    k = k - 1  # the hinge: the old regime's last point, a point of both
    # suffix sums from each candidate hinge (inclusive), without the trailing 0
    tt, *sums, _ = s.suffix
    st, st2, sy, sty = (a[:-1] for a in sums)
    tk, cnt = tt[k], (n - k).astype(np.float64)
    su = st[k] - tk * cnt
    su2 = st2[k] - 2 * tk * st[k] + tk * tk * cnt
    suy = sty[k] - tk * sy[k]
    total, total2 = float(sy[0]), s.prefix[2]
    det = n * su2 - su * su
    ok = det > 1e-18
    b = np.where(ok, (n * suy - su * total) / np.where(ok, det, 1.0), 0.0)
    a = (total - b * su) / n
    sse = total2 - a * total - b * suy
    shift = b * (tt[-1] - tk)
    best = _least(sse, ok & ((np.sign(shift) == sign) if sign else True))
    if best is None:
        return None
    sse_null = total2 - np.float64(total) ** 2 / n  # a Python float's ** raises on overflow
    return ChangeFit(
        "ramp",
        int(k[best]),
        float(shift[best]),
        float(max(sse[best], 0.0)),
        float(sse_null),
        "hinge",
    )


def hinge_from_level(t: np.ndarray, z: np.ndarray, *, min_points: int = 3) -> int | None:
    """Hinge index of ``z = b·max(0, t - t_k)`` where ``z`` is the series minus a known level
    before the change (so points before the hinge that stray from it — a warm-up transient —
    cost the same for every candidate and do not move the hinge).

    >>> t = np.arange(50.0)
    >>> z = np.where(t < 30, 0.0, 0.3 * (t - 30))
    >>> z[:5] = 2.0  # a transient at the start
    >>> hinge_from_level(t, z)
    30
    """
    n = z.size
    if n < 2 * min_points:
        return None
    k = np.arange(min_points - 1, n - min_points)
    tt, *sums, _ = _Sums(t, z).suffix
    st, st2, sz, stz = (a[:-1] for a in sums)
    tk, cnt = tt[k], (n - k).astype(np.float64)
    su2 = st2[k] - 2 * tk * st[k] + tk * tk * cnt
    suz = stz[k] - tk * sz[k]
    gain = np.where((su2 > 1e-18) & (suz > 0), suz * suz / np.where(su2 > 1e-18, su2, 1.0), -np.inf)
    best = int(np.argmax(gain))
    return int(k[best]) if np.isfinite(gain[best]) else None


def jump_ramp_fit(
    t: np.ndarray, y: np.ndarray, *, min_points: int = 3, sign: int = 1
) -> ChangeFit | None:
    """Best ``y = a`` before ``t_k`` and ``y = c + b·(t - t_k)`` from it: a level, then a line
    with its own intercept (a jump followed by growth, as a divergence's kick and climb).

    ``kind`` is ``"step"`` when the jump is most of the change, else ``"ramp"``.

    >>> t = np.arange(60.0)
    >>> f = jump_ramp_fit(t, np.where(t < 40, 0.0, 3.0 + 0.1 * (t - 40)))
    >>> f.index, f.kind, round(f.shift, 6)
    (40, 'step', 4.9)
    """
    return _fit(_jump_ramp_fit, _Sums(t, y), min_points=min_points, sign=sign)


def _jump_ramp_fit(s: _Sums, k: np.ndarray, sign: int) -> ChangeFit | None:
    n = s.n
    c1, c2, _ = s.prefix
    tt, st, st2, sy, sty, sy2 = s.suffix
    n1, m = k.astype(np.float64), (n - k).astype(np.float64)
    sse1 = c2[k] - c1[k] ** 2 / n1
    sxx = st2[k] - st[k] ** 2 / m
    sxy = sty[k] - st[k] * sy[k] / m
    syy = sy2[k] - sy[k] ** 2 / m
    ok = sxx > 1e-18
    b = np.where(ok, sxy / np.where(ok, sxx, 1.0), 0.0)
    sse = sse1 + syy - b * sxy
    a1 = c1[k] / n1
    start = sy[k] / m - b * (st[k] / m - tt[k])  # the line's value at t_k
    shift = start + b * (tt[-1] - tt[k]) - a1
    valid = ok & ((np.sign(shift) == sign) if sign else True)
    if sign:
        valid &= np.sign(start - a1) != -sign  # the new regime starts on the side it ends
    best = _least(sse, valid)
    if best is None:
        return None
    jump = float(start[best] - a1[best])
    kind: Kind = "step" if abs(jump) >= 0.5 * abs(float(shift[best])) else "ramp"
    sse_null = float(c2[-1] - c1[-1] ** 2 / n)
    return ChangeFit(
        kind, int(k[best]), float(shift[best]), float(max(sse[best], 0.0)), sse_null, "jump_ramp"
    )


def best_change(
    t: np.ndarray, y: np.ndarray, *, min_points: int = 3, sign: int = 1
) -> ChangeFit | None:
    """The best of :func:`step_fit`, :func:`ramp_fit` and :func:`jump_ramp_fit`.

    A model with more freedom must explain clearly more to be preferred (a ramp can mimic a
    step; a jump-then-line has one parameter more than either).

    >>> t = np.arange(60.0)
    >>> best_change(t, np.where(t < 30, 0.0, 4.0)).kind
    'step'
    >>> best_change(t, np.where(t < 30, 0.0, 0.2 * (t - 30))).kind
    'ramp'
    """
    sums = _Sums(t, y)
    step = _fit(_step_fit, sums, min_points=min_points, sign=sign)
    ramp = _fit(_ramp_fit, sums, min_points=min_points, sign=sign)
    if step is None or ramp is None:
        best = step or ramp
    else:
        best = ramp if ramp.sse < 0.9 * step.sse else step
    both = _fit(_jump_ramp_fit, sums, min_points=min_points, sign=sign)
    if best is None or (both is not None and _better(both.sse, best.sse, n=y.size)):
        return both
    return best


def _better(sse_more: float, sse_less: float, *, n: int) -> bool:
    """BIC for one extra parameter, on an effective sample of n/5 (the series is smoothed
    with a 5-point median and its noise is autocorrelated)."""
    n_eff = max(n / 5.0, 4.0)
    if sse_more <= 0:
        return True
    return bool(n_eff * np.log(max(sse_less, 1e-300) / sse_more) > 2.0 * np.log(n_eff))


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
