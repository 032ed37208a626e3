"""Cheap triggers: when is it worth re-running the detectors on the held window?

Checked at every tick in time proportional to the metrics that got new points (a median of a
few dozen recent values each), they are deliberately more sensitive than the detectors: a
trigger that fires on a healthy run only costs one bounded re-fit, a trigger that fires late
delays the alert. Each returns a reason (text) or None.

- **non-finite / overflow** (per point, in :meth:`Trigger.point`): a NaN or ±inf in a metric
  of :attr:`~proxydiag.diagnose.config.NonfiniteConfig.metrics`, a positive skip or NaN
  counter, a loss scale that fell;
- **grid** (with the levels): the last :data:`RECENT_POINTS` gradient norms are bf16 numbers
  after a reference of them that was not (:mod:`proxydiag.diagnose.detectors.master_weights`: fp32
  master weights lost); no level moves, so no level trigger would look;
- **level** (per tick, in :meth:`Trigger.level`): the median of the last
  :data:`RECENT_POINTS` points moved, in the direction a failure moves it, by more than
  :data:`Z_TRIGGER` robust σ (of successive differences) of the :data:`REFERENCE_POINTS`
  before them and (log-scaled
  metrics) by more than a :data:`FOLD_TRIGGER` fold; a mismatch metric is read as its
  disagreement (:func:`proxydiag.diagnose.detectors.mismatch.disagreement`: 1 − Pearson, log of a
  multiplicative error), which grows when something breaks. The offline detectors need ≥ 4 σ and a
  1.5× (loss) to 3× (grad norm) fold (``[divergence]``), ≥ 6 σ and 2.5× for mismatch
  (``[mismatch]``): the trigger fires before either is reached;
- **bound** (with the levels): the median of the last :data:`RECENT_POINTS` points of a
  mismatch quantity with a published bound stands beyond it (``[mismatch]``), whatever it
  was before: a mismatch beyond its bound from the first step (a quantized or fp8 rollout)
  has no move for the level trigger to see.
"""

from __future__ import annotations

import math

import numpy as np

from proxydiag.diagnose.config import MismatchConfig
from proxydiag.diagnose.detectors.master_weights import METRICS as GRID_METRICS
from proxydiag.diagnose.detectors.master_weights import MIN_BEFORE, OFF_SHARE, grid_states
from proxydiag.diagnose.detectors.mismatch import disagreement, published_bound, upper_bound
from proxydiag.metrics import SKIP_COUNTERS, is_mismatch
from proxydiag.watch.buffers import MetricBuffer

#: points whose median is the current level
RECENT_POINTS = 3
#: points before them that give the reference level and its spread
REFERENCE_POINTS = 48
#: robust σ of a level move that triggers (offline: z_min 4 for divergence, 6 for mismatch)
Z_TRIGGER = 3.0
#: fold of a log-scaled level move that triggers (offline: loss_fold 1.5, min_fold 2.5-3)
FOLD_TRIGGER = 1.3

#: metric -> direction of a failure: +1 grows, -1 falls, 0 either way
DIRECTIONS: dict[str, int] = {
    "grad_norm": 1,
    "loss": 1,
    "pg_loss": 0,
    "kl": 1,
    "clip_frac": 1,
    "entropy": 0,
    "reward": -1,
    # MoE routing (proxydiag.diagnose.detectors.router): concentration shows before the loss breaks
    "router_aux_loss": 1,
    "router_z_loss": 1,
    "expert_load_max": 1,
    "router_entropy": -1,
}


def direction(metric: str) -> int | None:
    """How ``metric`` moves when something breaks; None when its level is not watched.

    >>> direction("reward"), direction("mismatch_corr"), direction("mismatch_kl"), direction("lr")
    (-1, -1, 1, None)
    """
    if is_mismatch(metric):
        falls = ("mismatch_corr", "mismatch_is_ess", "mismatch_route_replay")
        return -1 if metric.startswith(falls) else 1
    return DIRECTIONS.get(metric)


def point(
    metric: str, value: float, previous: float | None, *, nonfinite: tuple[str, ...]
) -> str | None:
    """The reason a single new point is suspicious, or None.

    >>> point("grad_norm", float("nan"), 1.0, nonfinite=("grad_norm",))
    'grad_norm is nan'
    >>> (
    ...     point("loss_scale", 512.0, 1024.0, nonfinite=()),
    ...     point("loss", 2.0, 2.1, nonfinite=("loss",)),
    ... )
    ('loss_scale fell from 1024 to 512', None)
    """
    if metric in nonfinite and not math.isfinite(value):
        return f"{metric} is {value}"
    if metric in (*SKIP_COUNTERS, "nonfinite") and (value > 0 or math.isnan(value)):
        return f"{metric} counts {value:g}"
    if metric == "loss_scale" and previous is not None and value < previous:
        return f"loss_scale fell from {previous:g} to {value:g}"
    return None


def level(metric: str, buf: MetricBuffer) -> tuple[str, float] | None:
    """The reason the recent level of ``metric`` is suspicious and the size of its move (in
    units of the trigger's threshold: > 1), or None.

    >>> b = MetricBuffer(head_points=0, history_points=4, recent_points=64)
    >>> rng = np.random.default_rng(0)
    >>> for s, v in enumerate(np.exp(rng.normal(0, 0.05, 60))):
    ...     b.append(s, float(v))
    >>> level("grad_norm", b) is None
    True
    >>> for s in range(60, 63):
    ...     b.append(s, 2.5)
    >>> level("grad_norm", b)[0][:28]
    'grad_norm level 2.5 vs 1.008'
    """
    if metric in GRID_METRICS and (found := grid(metric, buf)) is not None:
        return found
    sign = direction(metric)
    if sign is None:
        return None
    values = buf.last(RECENT_POINTS + REFERENCE_POINTS)
    values = values[np.isfinite(values)]
    if values.size < RECENT_POINTS + 8:
        return None
    what = metric
    if is_mismatch(metric) and metric.startswith(
        ("mismatch_corr", "mismatch_is", "mismatch_prob_error")
    ):
        what = f"{metric} disagreement"
    if is_mismatch(metric):
        # the disagreement, as the detectors read it: a multiplicative error of 1.004 that
        # becomes 1.02 or a Pearson of 0.999 that becomes 0.99 is a 5x, 10x move
        values, sign = np.abs(disagreement(metric, values)), 1
    log = bool((values > 0).all()) and metric != "reward"
    y = np.log(values) if log else values
    ref, cur = y[:-RECENT_POINTS], y[-RECENT_POINTS:]
    base = float(np.median(ref))
    # the noise from successive differences: a climb inside the reference does not inflate it
    sigma = 1.4826 * float(np.median(np.abs(np.diff(ref)))) / math.sqrt(2.0)
    move = float(np.median(cur)) - base
    if sign and move * sign <= 0:
        return None
    floor = math.log(FOLD_TRIGGER) if log else 1e-12
    threshold = max(Z_TRIGGER * sigma, floor)
    if abs(move) <= threshold:
        return None
    now, then = (
        (math.exp(float(np.median(cur))), math.exp(base)) if log else (float(np.median(cur)), base)
    )
    return f"{what} level {now:.4g} vs {then:.4g} before", abs(move) / threshold


def bound(metric: str, buf: MetricBuffer, config: MismatchConfig) -> tuple[str, float] | None:
    """The reason the recent level of a mismatch quantity stands beyond its published bound
    and by how much (its disagreement over the bound's: > 1), or None (no bound, too few
    points, within it).

    >>> b = MetricBuffer(head_points=0, history_points=4, recent_points=64)
    >>> for s in range(3):
    ...     b.append(s, 0.004)
    >>> bound("mismatch_prob_diff", b, MismatchConfig()) is None
    True
    >>> for s in range(3, 6):
    ...     b.append(s, 0.03)
    >>> bound("mismatch_prob_diff", b, MismatchConfig())
    ('mismatch_prob_diff 0.03 beyond its bound 0.01', 3.0)
    """
    if not is_mismatch(metric) or (limit := upper_bound(metric, config)) is None or limit <= 0:
        return None
    values = buf.last(RECENT_POINTS)
    values = values[np.isfinite(values)]
    if values.size < RECENT_POINTS:
        return None
    now = float(np.median(np.abs(disagreement(metric, values))))
    if now <= limit:
        return None
    shown = float(np.median(values))
    published = published_bound(metric, config)
    return f"{metric} {shown:.4g} beyond its bound {published:.4g}", now / limit


def grid(metric: str, buf: MetricBuffer) -> tuple[str, float] | None:
    """The reason the latest points of ``metric`` moved onto the bf16 grid, or None: at least
    :data:`RECENT_POINTS` of them on it, after at least ``MIN_BEFORE`` held points mostly off
    it (it keeps firing while the run on the grid grows, for the detector needs ``MIN_POINTS``
    of them; short decimals say nothing and are skipped).

    >>> b = MetricBuffer(head_points=0, history_points=4, recent_points=64)
    >>> x = np.exp(np.random.default_rng(1).normal(0, 0.2, 30))
    >>> for s, v in enumerate(x):
    ...     b.append(s, float(v))
    >>> grid("grad_norm", b) is None
    True
    >>> for s, v in enumerate(x[:3].astype(np.float32).view(np.uint32) & 0xFFFF0000, start=30):
    ...     b.append(s, float(np.uint32(v).view(np.float32)))
    >>> grid("grad_norm", b)[0]
    'grad_norm on the bf16 grid (3 points) after 30 points off it'
    """
    states = grid_states(buf.last(RECENT_POINTS + REFERENCE_POINTS))
    states = states[states >= 0]
    off = np.flatnonzero(states != 1)
    k = int(states.size - (off[-1] + 1)) if off.size else int(states.size)
    ref = states[: states.size - k]
    if k < RECENT_POINTS or ref.size < MIN_BEFORE or float((ref == 1).mean()) > OFF_SHARE:
        return None
    return f"{metric} on the bf16 grid ({k} points) after {ref.size} points off it", 2.0
