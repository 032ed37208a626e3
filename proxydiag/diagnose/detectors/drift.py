"""Slow drift, stalls and throughput drops: context events (``info``) that never decide a label.

Spike rules miss a loss creeping upward over thousands of steps (a data-loader replay bug,
docs/failures.md#loss-divergence); a monotone-trend test catches it: Mann-Kendall (Kendall's τ of
value against step) for significance and the Theil-Sen slope for size, on at most ``max_points``
bucket means. A stall is a run whose reward (or loss) shows no trend at all. A throughput drop
is a step down that stays.
"""

from __future__ import annotations

import numpy as np

from proxydiag.diagnose._changepoint import step_fit
from proxydiag.diagnose._stats import downsample, kendall_tau, robust_level, theil_sen_slope
from proxydiag.diagnose.config import DiagnoseConfig, DriftConfig
from proxydiag.diagnose.view import RunView, Series, view
from proxydiag.events import Event
from proxydiag.run import Run

#: metric -> the direction of a harmful drift
DRIFTS = {"loss": 1, "grad_norm": 1, "reward": -1, "mismatch_prob_diff": 1, "mismatch_k3": 1}


NAME = "drift"
#: context only: slow drift, stalls and throughput drops are ``info`` events, which the
#: taxonomy never reads for a label (the watcher skips it between final diagnoses)
DECIDES = False


def reads(cfg: DiagnoseConfig) -> tuple[str, ...]:
    """The canonical metrics :func:`detect` reads."""
    return (*DRIFTS, "reward", "loss", "throughput", "step_time")


def detect(run: Run | RunView, cfg: DiagnoseConfig) -> list[Event]:
    """Events ``drift``, ``stall`` and ``throughput_drop`` (all ``info``).

    >>> from proxydiag.diagnose.view import from_arrays
    >>> rng = np.random.default_rng(0)
    >>> t = np.arange(2000)
    >>> loss = 2.0 + 0.0004 * t + rng.normal(0, 0.05, t.size)
    >>> [(e.kind, e.metric) for e in detect(from_arrays({"loss": (t, loss)}), DiagnoseConfig())]
    [('drift', 'loss')]
    """
    rv = view(run)
    c = cfg.drift
    events = []
    for metric, direction in DRIFTS.items():
        s = rv.get(metric)
        if s is not None and s.finite.sum() >= 20:
            event = _drift(s, direction, c)
            if event is not None:
                events.append(event)
    progress = rv.get("reward") or rv.get("loss")
    if progress is not None and progress.finite.sum() >= 20:
        events.extend(_stall(progress, c))
    for metric, sign in (("throughput", -1), ("step_time", 1)):
        s = rv.get(metric)
        if s is not None and s.finite.sum() >= 20:
            events.extend(_throughput(s, sign, c))
    return events


def _trend(s: Series, c: DriftConfig) -> tuple[float, float, float, float]:
    """(tau, p-value, Theil-Sen change over the run, robust spread) of the finite values."""
    ok = s.finite
    t, y = downsample(s.steps[ok], s.values[ok], max_points=c.max_points)
    tau, p = kendall_tau(t, y)
    slope = theil_sen_slope(y, t)
    _, spread = robust_level(s.values[ok])
    return float(tau), float(p), float(slope * (t[-1] - t[0])), spread


def _drift(s: Series, direction: int, c: DriftConfig) -> Event | None:
    tau, p, change, spread = _trend(s, c)
    if not (p < c.p_value and np.sign(change) == direction):
        return None
    if abs(change) < c.min_rel_change * max(spread, 1e-12):
        return None
    word = "rises" if direction > 0 else "falls"
    return Event(
        "drift",
        s.name,
        int(s.steps[0]),
        int(s.steps[-1]),
        "info",
        float(min(0.99, abs(tau) + 0.3)),
        f"{s.name} {word} steadily over the run: Theil-Sen change {change:+.4g} "
        f"(Mann-Kendall τ {tau:+.2f}, p {p:.1e})",
    )


def _stall(s: Series, c: DriftConfig) -> list[Event]:
    _, p, change, spread = _trend(s, c)
    if p < 0.05 and abs(change) >= 0.25 * max(spread, 1e-12):
        return []
    return [
        Event(
            "stall",
            s.name,
            int(s.steps[0]),
            int(s.steps[-1]),
            "info",
            0.6,
            f"{s.name} makes no progress over the run: Theil-Sen change {change:+.4g} "
            f"against a spread of {spread:.4g} (Mann-Kendall p {p:.2f})",
        )
    ]


def _throughput(s: Series, sign: int, c: DriftConfig) -> list[Event]:
    ok = s.finite
    steps, y = s.steps[ok], s.values[ok]
    fit = step_fit(y, min_points=max(5, y.size // 50), sign=sign)
    if fit is None or fit.gain < 0.5:
        return []
    before = float(np.median(y[: fit.index]))
    after = float(np.median(y[fit.index :]))
    ratio = after / before if before else float("nan")
    slow = ratio < c.throughput_drop_ratio if sign < 0 else ratio > 1 / c.throughput_drop_ratio
    if not slow:
        return []
    return [
        Event(
            "throughput_drop",
            s.name,
            int(steps[fit.index]),
            None,
            "info",
            0.7,
            f"{s.name} changes at step {int(steps[fit.index])}: {before:.4g} -> {after:.4g} "
            f"({ratio:.2f}×) and stays",
        )
    ]
