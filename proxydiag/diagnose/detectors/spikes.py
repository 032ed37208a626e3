"""Spikes in grad norm and loss: robust z against a trailing rolling median/MAD on log scale.

A spike that returns to its baseline within ``revert_steps`` is a *spike* (BLOOM 176B: grad norm
0.24 -> 960, recovered in ~30 iterations); one that does not is a *level shift*, evidence of
divergence (tr8-104B: 6.44 -> 11.4, then NaN). Grad-norm spikes usually precede loss spikes
(OLMo 2), which the taxonomy reads from the onsets.
"""

from __future__ import annotations

import numpy as np

from proxydiag.diagnose._stats import rolling_mad, rolling_median, runs_of
from proxydiag.diagnose.config import DiagnoseConfig, SpikeConfig
from proxydiag.diagnose.view import RunView, Series, view
from proxydiag.events import Event
from proxydiag.run import Run

#: at most this many spike events per metric (the largest), so a noisy run stays readable
MAX_EVENTS = 20


NAME = "spikes"
#: its events decide labels (gradient_overflow, loss_divergence)
DECIDES = True


def reads(cfg: DiagnoseConfig) -> tuple[str, ...]:
    """The canonical metrics :func:`detect` reads: the configured ones."""
    return tuple(cfg.spikes.metrics)


def detect(run: Run | RunView, cfg: DiagnoseConfig) -> list[Event]:
    """Events ``spike`` (info: reverted) and ``level_shift`` (warning: did not revert).

    >>> from proxydiag.diagnose.view import from_arrays
    >>> rng = np.random.default_rng(0)
    >>> g = np.exp(rng.normal(0.0, 0.05, 300))
    >>> g[150] *= 40.0
    >>> [
    ...     (e.kind, e.onset_step)
    ...     for e in detect(from_arrays({"grad_norm": (range(300), g)}), DiagnoseConfig())
    ... ]
    [('spike', 150)]
    """
    rv = view(run)
    events: list[Event] = []
    for metric in cfg.spikes.metrics:
        s = rv.get(metric)
        if s is not None and s.finite.sum() >= 10:
            events.extend(_spikes(s, cfg.spikes))
    return events


def _spikes(s: Series, c: SpikeConfig) -> list[Event]:
    ok = s.finite
    steps, x = s.steps[ok], s.values[ok]
    logs = bool((x > 0).all())
    y = np.log(x) if logs else x
    w = s.points(c.window_steps, minimum=5)
    med = rolling_median(y, window_points=w)
    sig = rolling_mad(y, med, window_points=w)
    # compare each point with the window that ends just before it
    base, spread = np.r_[np.nan, med[:-1]], np.r_[np.nan, sig[:-1]]
    # on raw scale (values ≤ 0 present, e.g. a dead metric printing 0.000) the floor is
    # relative to the series' own magnitude
    floor = 1e-3 if logs else 1e-3 * max(float(np.max(np.abs(y))), 1e-12)
    z = (y - base) / np.maximum(spread, floor)
    jump = (y - base) >= (np.log(c.min_ratio) if logs else 0.0)
    hot = (z > c.z_threshold) & jump
    hot[:w] = False  # the trailing window is not yet filled
    if not hot.any():
        return []
    starts, ends = runs_of(hot)
    peaks = np.maximum.reduceat(z, starts)
    order = np.argsort(-peaks)[:MAX_EVENTS]
    revert_pts = s.points(c.revert_steps, minimum=2)
    events = []
    for i in sorted(order):
        a, b = int(starts[i]), int(ends[i])
        after = y[b : b + revert_pts]
        reverted = after.size == 0 or bool(
            np.median(after) - base[a] < (y[a:b].max() - base[a]) / 2
        )
        ratio = float(np.exp(y[a:b].max() - base[a])) if logs else float(y[a:b].max() - base[a])
        what = (
            f"{ratio:.1f}× its rolling median" if logs else f"+{ratio:.4g} over its rolling median"
        )
        events.append(
            Event(
                "spike" if reverted else "level_shift",
                s.name,
                int(steps[a]),
                int(steps[min(b, steps.size - 1)]) if reverted else None,
                "info" if reverted else "warning",
                float(min(0.99, 0.5 + peaks[i] / (4 * c.z_threshold))),
                f"{s.name}: {x[a:b].max():.4g} at step {int(steps[a])} = {what} "
                f"({_unlog(base[a], logs):.4g}), robust z {peaks[i]:.1f}; "
                + ("returned within " if reverted else "did not return within ")
                + f"{c.revert_steps} steps",
            )
        )
    return events


def _unlog(value: float, logs: bool) -> float:
    """Back from log scale when the detector worked on logs."""
    return float(np.exp(value)) if logs else float(value)
