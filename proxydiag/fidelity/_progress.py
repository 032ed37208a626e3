"""Learning progress over a phase, scored: reward gain, loss descent, entropy decline.

For each of ``reward``, ``loss`` and ``entropy`` the change of every run over the phase (median
of its last fifth minus median of its first twentieth — at least 3 points —, so a change that
happens early in the phase is not already inside the starting level) is measured in units of
the run's own noise σ (robust σ of its residuals around the smoothed trend) and as a fraction
of the full seeds' median change; the progress at half of it is where the smoothed trend first
reaches half-way.
Where the full seeds change by at least ``learn_min_sigma`` σ, the proxy

* **learns** when it moves the same way by at least ``learn_gain_fraction`` (50%) of the full
  seeds' change — or its interval reaches that (a pruned proxy may learn less, not much less) —
  and reaches half of its own change within the seeds' range of that progress stretched by
  ``learn_pace_factor`` (2×) either way;
* **learns less** (``fraction`` with an upper bound below 50%), **more** (a lower bound above
  ``learn_excess_factor``, 2×: an entropy collapsing far faster than the full run's), or at
  **another pace**: the metric is off in this phase (it caps the verdict at partial,
  :mod:`.verdicts`);
* **does not learn** (:func:`not_learning`: reward, else loss, moves less than
  ``learn_min_fraction`` (15%) of the full seeds' change, its interval below 50%): the proxy is
  unfaithful, fault or no fault.

The interval of ``fraction``: the proxy's change ± z·se, se = √2 · 1.2533 σ / √(k / b), ``k`` the
points of the start's median (the smaller of the two medians; a conservative standard error of
their difference), ``b`` the bootstrap's block length (autocorrelated noise has ``k / b``
independent points), over the full seeds' |change|.
"""

from __future__ import annotations

from collections.abc import Mapping
from statistics import NormalDist
from typing import Any

import numpy as np
import numpy.typing as npt

from proxydiag.align.grid import MetricGrid
from proxydiag.align.noise import block_points_for
from proxydiag.align.smooth import smooth, window_for
from proxydiag.fidelity._stats import robust_sigma
from proxydiag.fidelity.config import FidelityConfig
from proxydiag.fidelity.tests.trend import Change

Floats = npt.NDArray[np.float64]
#: metric -> the direction learning moves it when the full run does not say (docs only: the
#: full seeds' own direction is what the proxy is held to)
LEARNING_METRICS: dict[str, str] = {"reward": "gain", "loss": "descent", "entropy": "decline"}
#: median of k normal points: standard error 1.2533 σ / √k
_MEDIAN_SE = float(np.sqrt(np.pi / 2))


def learning(
    metrics: Mapping[str, MetricGrid], config: FidelityConfig
) -> dict[str, dict[str, Any]]:
    """The progress record of each learning metric present (see the module docstring)."""
    out: dict[str, dict[str, Any]] = {}
    for name in LEARNING_METRICS:
        if name in metrics:
            record = _record(metrics[name], config)
            if record is not None:
                out[name] = record
    return out


def not_learning(records: Mapping[str, Mapping[str, Any]], config: FidelityConfig) -> str | None:
    """Why the proxy does not learn where the full seeds do (reward, else loss): it moves less
    than ``learn_min_fraction`` of their change (or the other way) and its interval stays
    below ``learn_gain_fraction``; None when it learns or the full run does not change."""
    for metric in ("reward", "loss"):
        r = records.get(metric)
        if r is None or r.get("status") == "flat":
            continue
        if (
            r["fraction"] < config.learn_min_fraction
            and r["fraction_ci"][1] < config.learn_gain_fraction
        ):
            z = r["sigma_full"]  # None: a change over noise-free points (infinitely many σ)
            moves = f"{z:+.1f}σ" if z is not None else "(noise-free)"
            return (
                f"does not learn: the full seeds' {metric} changes {moves}, "
                f"the proxy's {r['fraction']:.0%} of that (interval up to "
                f"{r['fraction_ci'][1]:.0%})"
            )
        return None
    return None


def off(records: Mapping[str, Mapping[str, Any]], *, pace: bool = True) -> dict[str, str]:
    """Metric -> why its progress is off (learns less or more; at another pace, with ``pace``)."""
    statuses = ("less", "more", "pace") if pace else ("less", "more")
    return {m: str(r["why"]) for m, r in records.items() if r.get("status") in statuses}


def _record(mg: MetricGrid, config: FidelityConfig) -> dict[str, Any] | None:
    if mg.buckets < config.min_points:
        return None
    fulls = [change(mg.sample[i], trend_fraction=config.trend_fraction) for i in range(mg.n_full)]
    proxy = change(mg.proxy, trend_fraction=config.trend_fraction)
    delta_full = float(np.median([c.delta for c in fulls]))
    z_full = float(np.median([c.z for c in fulls]))
    record: dict[str, Any] = {
        "change_full": round(delta_full, 6),
        "change_proxy": round(proxy.delta, 6),
        "sigma_full": round(z_full, 3) if np.isfinite(z_full) else None,
        "sigma_proxy": round(proxy.z, 3) if np.isfinite(proxy.z) else None,
        "seeds_change": [round(c.delta, 6) for c in fulls],
    }
    if not (abs(z_full) >= config.learn_min_sigma and delta_full != 0):
        return {**record, "status": "flat", "why": "the full run does not change here"}
    fraction, (lo, hi) = _fraction(mg, proxy, delta_full, config)
    halves = [c.half_progress for c in fulls if c.half_progress is not None]
    record.update(
        fraction=round(fraction, 4),
        fraction_ci=[round(lo, 4), round(hi, 4)],
        half_progress_full=[round(min(halves), 4), round(max(halves), 4)] if halves else None,
        half_progress_proxy=proxy.half_progress,
    )
    status, why = _judge(mg.metric, fraction, hi, halves, proxy, config)
    return {**record, "status": status, "why": why}


def change(curve: Floats, *, trend_fraction: float) -> Change:
    """The net change of a phase's grid curve (NaN gaps ignored).

    >>> c = change(np.r_[np.zeros(10), np.ones(90)], trend_fraction=0.05)
    >>> c.delta, round(c.half_progress, 2)
    (1.0, 0.1)
    """
    f = curve[np.isfinite(curve)]
    if f.size < 6:
        return Change(0.0, 0.0, None)
    start = float(np.median(f[: max(3, f.size // 20)]))
    end = float(np.median(f[-max(2, f.size // 5) :]))
    trend = smooth(f, window_points=window_for(f.size, fraction=trend_fraction))
    sigma = float(robust_sigma(f - trend))
    halfway = np.flatnonzero((trend - start) * np.sign(end - start) >= abs(end - start) / 2)
    half = float(halfway[0] / (f.size - 1)) if end != start and halfway.size else None
    return Change(end - start, sigma, half)


def _fraction(
    mg: MetricGrid, proxy: Change, delta_full: float, config: FidelityConfig
) -> tuple[float, tuple[float, float]]:
    """The proxy's change as a fraction of the full seeds', with its interval."""
    n = int(np.count_nonzero(np.isfinite(mg.proxy)))
    k = max(3, n // 20)  # the start's median is the less certain one
    block = block_points_for(n, smooth_points=window_for(n, fraction=config.smooth_fraction))
    se = np.sqrt(2.0) * _MEDIAN_SE * proxy.sigma / np.sqrt(max(k / block, 1.0))
    z = NormalDist().inv_cdf(0.5 + config.ci_level / 2)
    sign = np.sign(delta_full)
    fraction = sign * proxy.delta / abs(delta_full)
    half_width = z * se / abs(delta_full)
    return float(fraction), (float(fraction - half_width), float(fraction + half_width))


def _judge(
    metric: str,
    fraction: float,
    hi: float,
    halves: list[float],
    proxy: Change,
    config: FidelityConfig,
) -> tuple[str, str]:
    what = LEARNING_METRICS[metric]
    lo = fraction - (hi - fraction)
    if lo > config.learn_excess_factor:
        return "more", (
            f"{metric} {what} {fraction:.1f}× the full seeds' (interval from "
            f"{lo:.1f}× > ×{config.learn_excess_factor:g})"
        )
    if hi < config.learn_gain_fraction:
        return "less", (
            f"{metric} {what} {fraction:.0%} of the full seeds' (interval up to "
            f"{hi:.0%} < {config.learn_gain_fraction:.0%})"
        )
    if halves and proxy.half_progress is not None:
        slow, fast = max(halves) * config.learn_pace_factor, min(halves) / config.learn_pace_factor
        if not fast <= proxy.half_progress <= slow:
            return "pace", (
                f"{metric} half-way at {proxy.half_progress:.0%} of the phase, the "
                f"full seeds at {min(halves):.0%}–{max(halves):.0%} (beyond ×"
                f"{config.learn_pace_factor:g})"
            )
    return "learns", f"{metric} {what} {fraction:.0%} of the full seeds'"
