"""A sustained change of one series: where it starts, its shape, and how large it is.

Shared by the divergence and mismatch detectors: smooth with a short centred median (isolated
spikes do not move the fit), locate the single best step or hinge (:mod:`._changepoint`), and
measure the level after the change against the level before it in robust σ.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

import numpy as np

from proxydiag.diagnose._changepoint import ChangeFit, best_change, hinge_from_level
from proxydiag.diagnose._stats import (
    block_level,
    bucket_medians,
    noise_sigma,
    robust_level,
    rolling_median,
)

#: change points of longer series are located on this many bucket medians
MAX_FIT_POINTS = 2000
#: logged points a change inside the tail needs after it to be measured on them alone
MIN_AFTER_POINTS = 5


@dataclass(frozen=True)
class Change:
    """``index`` is the first point of the change; levels are in the transformed space."""

    index: int
    kind: str  # "step" or "ramp"
    before: float
    after: float
    sigma: float
    #: the step where the change begins: a climb at its hinge; a jump just after the last
    #: point before it (the jump happened between two logged points, and values it made
    #: non-finite are not in the series)
    onset_step: int = 0

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
    locate_power: float | None = None,
    peak_points: int | None = None,
    min_after_steps: float | None = None,
) -> Change | None:
    """The best single change of ``y`` (finite, in the direction ``sign``) and its size.

    ``after="tail"`` measures the level at the end of the series (a change that reverted
    measures small); ``"peak"`` the most extreme sustained level after the change.
    ``baseline_points`` measures the level before on the run's own early baseline (at most
    that many points, never past the change).
    ``locate_power``: ``y`` is a log, and the change is located on ``x ** locate_power``
    (a disagreement that climbs linearly is concave on log scale, which tilts a hinge early;
    second-order measures such as KL climb with the square of a first-order one, hence 1/2);
    sizes are always measured on ``y``.
    ``min_after_steps``: with ``after="tail"``, a change inside the tail that has lasted this
    many steps (and :data:`MIN_AFTER_POINTS` points) to the end is measured on its own points
    (see :func:`_tail_level`): a run stopped soon after it broke.
    ``peak_points``: with ``after="peak"``, for a change within the series' last three tenths,
    the level at the very end may also be the median of only this many last points: a climb
    still under way when a long run ends is seen at its height (a tenth of the series would
    average it down), while a glitch that reverted mid-run, or a change located early, is
    still measured over a tenth of the series.

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
    located = _locate_change(
        t, y, sign=sign, tail_fraction=tail_fraction, locate_power=locate_power
    )
    if located is None:
        return None
    k, kind, lo, model = located
    base = y[lo : max(min(lo + baseline_points, k), lo + 3) if baseline_points else k]
    before, spread = robust_level(base)
    sigma = max(spread, noise_sigma(base), sigma_floor)
    level_w = max(3, int(tail_fraction * n))
    if after == "tail":
        level = _tail_level(
            t, y, k, sign=sign, level_points=level_w, min_after_steps=min_after_steps
        )
    else:
        rolled = block_level(y[k:], window_points=level_w)
        if peak_points and peak_points <= n - k <= 3 * level_w:
            # a change in the series' last stretch, still under way at its end
            rolled = np.append(rolled, np.median(y[-peak_points:]))
        level = float(np.nanmax(rolled) if sign > 0 else np.nanmin(rolled))
    onset = int(t[k]) if model == "hinge" or k == 0 else int(t[k - 1]) + 1
    return Change(k, kind, before, level, sigma, onset)


def _tail_level(
    t: np.ndarray,
    y: np.ndarray,
    k: int,
    *,
    sign: int,
    level_points: int,
    min_after_steps: float | None,
) -> float:
    """The level at the end of the series: the median of its last ``level_points`` (at least
    :data:`MIN_AFTER_POINTS`), or, for a
    change at ``k`` inside them that has lasted ``min_after_steps`` and
    :data:`MIN_AFTER_POINTS` to the end, of the points from the change on, unless their last
    half or quarter has come back (the nearest of the medians to the level before). A run stopped
    60 steps after its loss jumped 5x measured the mixture of a tenth of the run (mostly
    before the jump): nothing. A spike that is reverting when the run ends still measures
    little."""
    # never fewer than MIN_AFTER_POINTS: a series' last three points hold a two-point spike
    # at its median (a live prefix of a healthy run, its grad norm x7 for two points, read
    # as a divergence)
    level = float(np.median(y[-max(level_points, MIN_AFTER_POINTS) :]))
    after = y.size - k
    if (
        min_after_steps is None
        or after >= level_points
        or after < MIN_AFTER_POINTS
        or t[-1] - t[k] < min_after_steps
    ):
        return level
    # a change that has come back: the nearest of the medians of its points, their last
    # half and their last quarter (at least MIN_AFTER_POINTS) to the level before
    ends = (
        float(np.median(y[k:])),
        float(np.median(y[k + after // 2 :])),
        float(np.median(y[-max(MIN_AFTER_POINTS, after // 4) :])),
    )
    return min(ends) if sign > 0 else max(ends)


def _locate_change(
    t: np.ndarray, y: np.ndarray, *, sign: int, tail_fraction: float, locate_power: float | None
) -> tuple[int, str, int, str] | None:
    """(index of the change, its kind, start of the window the fit used, the model that found
    it), indices into ``y``.

    Longer series are located on bucket medians (at most :data:`MAX_FIT_POINTS`; the
    documented analysis resolution) and measured at full resolution by the caller.
    """
    n = y.size
    if n > MAX_FIT_POINTS:
        tb, yb, starts = bucket_medians(t, y, max_points=MAX_FIT_POINTS)
        found = _locate_change(
            tb, yb, sign=sign, tail_fraction=tail_fraction, locate_power=locate_power
        )
        if found is None:
            return None
        return int(starts[found[0]]), found[1], int(starts[found[2]]), found[3]
    ys = rolling_median(y, window_points=5 if n >= 40 else 3, center=True)
    min_points = max(3, n // 100)
    located = _locate(t, ys, sign=sign, min_points=min_points, locate_power=locate_power)
    if located is None:
        return None
    fit, space = located
    # refit without a leading transient (warm-up) and on the rise alone (up to where it
    # reaches its extreme): both would otherwise tilt the fit
    end = _reach(ys, fit.index, sign=sign, level_points=max(3, int(tail_fraction * n)))
    end = min(n, end + max(2 * min_points, 5))
    lo = _settled(ys, fit.index)
    window = space[lo:end]  # the hinge is refined on this stretch only
    if (lo > 0 or end < n) and end - fit.index >= min_points and fit.index - lo >= min_points:
        refound = _locate(
            t[lo:end], ys[lo:end], sign=sign, min_points=min_points, locate_power=locate_power
        )
        if refound is not None:
            refit, window = refound
            fit = replace(refit, index=refit.index + lo)
    if fit.model == "hinge":
        hinge = _refine_hinge(t[lo:end], window, fit.index - lo, sign=sign, min_points=min_points)
        fit = replace(fit, index=lo + hinge)
    return fit.index, fit.kind, lo, fit.model


def _locate(
    t: np.ndarray, ys: np.ndarray, *, sign: int, min_points: int, locate_power: float | None
) -> tuple[ChangeFit, np.ndarray] | None:
    """The best change, and the series it was found on."""
    space = ys if locate_power is None else np.exp(locate_power * (ys - np.nanmedian(ys)))
    fit = best_change(t, space, min_points=min_points, sign=sign)
    return None if fit is None else (fit, space)


def _reach(ys: np.ndarray, k: int, *, sign: int, level_points: int) -> int:
    """First index from ``k`` where ``ys`` comes within 10% of its most extreme sustained level."""
    before = float(np.median(ys[:k])) if k else float(ys[0])
    rolled = sign * block_level(ys[k:], window_points=level_points)
    peak = float(np.nanmax(rolled))
    target = sign * before + 0.9 * (peak - sign * before)
    hit = np.flatnonzero(sign * ys[k:] >= target)
    return k + int(hit[0]) if hit.size else ys.size


def _settled(ys: np.ndarray, k: int) -> int:
    """End of a leading transient: the first point within 1 robust σ of the level just before
    the change (measured on the second half of the stretch before it), at most a quarter of
    the way to the change."""
    if k < 8:
        return 0
    level, spread = robust_level(ys[k // 2 : k])
    near = np.flatnonzero(np.abs(ys[:k] - level) <= 1.0 * max(spread, 1e-12))
    # a warm-up is a short stretch at the start; more than that is a drift, not a transient
    return min(int(near[0]), k // 4) if near.size else 0


def _refine_hinge(t: np.ndarray, ys: np.ndarray, k: int, *, sign: int, min_points: int) -> int:
    """Re-place a climb's hinge ``k`` against the robust level before it, on the foot of the
    climb (up to where it first stands 16 robust σ clear of that level), so that a climb that
    steepens later (a climb that tips into divergence) or levels off does not tilt it.
    Twice: the level moves with the hinge. ``t``, ``ys`` are the stretch the climb was located
    on (after any leading transient, up to just past the rise); indices are into it."""
    for _ in range(2):
        if k < min_points:
            break
        ref = ys[k // 2 : k]
        level, spread = robust_level(ref)
        sigma = max(spread, noise_sigma(ref), 1e-12)
        clear = np.flatnonzero(sign * (ys[k:] - level) > 16.0 * sigma)
        foot = min(ys.size, k + int(clear[0]) + max(min_points, 2)) if clear.size else ys.size
        found = hinge_from_level(t[:foot], sign * (ys[:foot] - level), min_points=min_points)
        if found is None:
            break
        k = found
    return k
