"""Mismatch shift: a one-sided CUSUM of each mismatch quantity's log disagreement against the
run's own early noise, for the live guard's earliest precision alert
(docs/failures.md#the-streaming-mismatch-statistic).

The change fit of :mod:`.mismatch` dates a climb well, but confirms it only once the climb
has gone on for a while (it needs points after the change to tell a climb from a bump that
comes back). This statistic says "the mismatch has left its early level" as soon as the data
allow, reading points up to each step only, so a live prefix gives what the whole run gives
at that step:

- each ``mismatch_*`` metric becomes its disagreement on log scale (the transform of
  :mod:`.mismatch`: |Δp|, k3, 1 − Pearson, |log IS mean| ...);
- the reference is the series' first :data:`BASE_POINTS` points (fewer, down to
  :data:`MIN_BASE_POINTS`, while the run is young: the points up to :data:`GUARD_POINTS`
  before the one judged): their median, and their robust σ (MAD: the marginal spread, so a
  slowly wandering, autocorrelated noise is counted whole), at least :data:`SIGMA_FLOOR`;
- the statistic is ``S_i = max(0, S_{i-1} + min(z_i, Z_CAP) - DRIFT)``; one point adds at most
  ``Z_CAP - DRIFT``, so a spike (an fp16 overflow step, a heavy-tailed draw) cannot alarm;
- it alarms at the first point where ``S`` has reached :data:`THRESHOLD` σ and the level (the
  median of the last :data:`LEVEL_POINTS` points, or of the last :data:`LEVEL_STEPS` steps
  when they hold more, so a bump that comes back within a few steps does not stand; on a
  sparse log, the last point when the last three climb from the early level: see
  :func:`_level`) stands ``shift_fold`` times the reference's disagreement (squared for
  a second-order measure; ``[mismatch]``) and :data:`SHIFT_Z` σ above it, and the change is
  *fast*: at least :data:`FAST_PART` of its rise came within the last :data:`FAST_SHARE` of
  the steps so far. A slow drift over the run, benign while within its bound, is left to the
  change fit of :mod:`.mismatch` whatever its size; a sawtooth at weight syncs or noise that
  stays under the fold never alarms; a disagreement under :data:`NEGLIGIBLE` is rounding
  noise and is not judged.

The onset is where the level last rose past :data:`LEFT_Z` σ (or a quarter of the gate) above
the level it left (the reference, or the level just before the rise when the noise had
wandered above it) and stayed, not where it crossed the gate.
Events are ``mismatch_shift`` (critical); the taxonomy reads them as a mismatch change, after
the change fit's events (which date a change better) when both exist.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from proxydiag.diagnose.config import DiagnoseConfig, MismatchConfig
from proxydiag.diagnose.detectors.mismatch import _badness, _floor, _order, spread_artefact
from proxydiag.diagnose.view import RunView, Series, view
from proxydiag.events import Event
from proxydiag.run import Run

#: the reference: the series' first points (its early noise) ...
BASE_POINTS = 24
#: ... at least this many (a younger series is not judged)
MIN_BASE_POINTS = 8
#: points between a young reference and the point judged
GUARD_POINTS = 3
#: the least σ of the log disagreement (5%): a baseline logged with few digits is not noiseless
SIGMA_FLOOR = 0.05
#: allowance per point, in σ
DRIFT = 1.0
#: the most one point adds, in σ
Z_CAP = 4.5
#: the statistic's alarm level, in σ
THRESHOLD = 10.0
#: points whose median is the level that must stand past the gate: the last LEVEL_POINTS, or
#: those of the last LEVEL_STEPS steps when they are more (a densely logged run: a bump that
#: comes back within a few steps does not stand)
LEVEL_POINTS = 3
LEVEL_STEPS = 10
#: on a sparse log, a climb of the last CLIMB_POINTS points from the level is read at its
#: last point (see _level)
CLIMB_POINTS = 3
CLIMB_SHARE = 0.5
#: the onset: where the level last rose past this many σ (or a quarter of the gate) above
#: the level it left, and stayed
LEFT_Z = 3.0
#: a change is *fast* when at least FAST_PART of its (log) rise came within the last
#: FAST_SHARE of the steps the series has so far; only a fast change alarms (a slow drift
#: over the run, benign while within its bound, is left to the change fit of .mismatch)
FAST_SHARE = 1.0 / 3.0
FAST_PART = 0.75
#: the level then is the median of the points within this share of the steps so far around it
THEN_SHARE = 0.05
#: a fast change also stands this many σ of the early noise above the early level
SHIFT_Z = 4.0
#: a disagreement under this (squared for a second-order measure) is rounding noise: an fp32
#: sampler and learner log |Δp| ~1e-8, a bf16 pair ~3e-3, an fp16 pair ~8e-4; relative
#: moves under it are not judged
NEGLIGIBLE = 3e-4


@dataclass(frozen=True)
class Shift:
    """A mismatch metric's first alarm: ``alarm`` and ``onset`` are indices of its finite
    points; ``level`` and ``sigma`` the reference (log disagreement), ``now`` the level at the
    alarm and ``statistic`` the CUSUM there."""

    alarm: int
    onset: int
    level: float
    sigma: float
    now: float
    statistic: float


NAME = "mismatch_shift"
#: its events decide labels (precision_fault), when the change fit has found nothing yet
DECIDES = True


def reads(cfg: DiagnoseConfig) -> tuple[str, ...]:
    """The canonical metrics :func:`detect` reads: every mismatch quantity (a prefix)."""
    return ("mismatch*",)


def detect(run: Run | RunView, cfg: DiagnoseConfig) -> list[Event]:
    """One critical ``mismatch_shift`` event per mismatch metric whose statistic alarms.

    >>> from proxydiag.diagnose.view import from_arrays
    >>> rng = np.random.default_rng(0)
    >>> t = np.arange(300)
    >>> climb = np.where(t < 180, 1.0, 1.0 + 0.05 * (t - 180))
    >>> d = 0.003 * climb * np.exp(rng.normal(0, 0.1, 300))
    >>> rv = from_arrays({"mismatch_prob_diff": (t, d)})
    >>> [(e.kind, e.onset_step) for e in detect(rv, DiagnoseConfig())]
    [('mismatch_shift', 186)]
    >>> alarm_step(rv, DiagnoseConfig())  # 2.3x its early level, 30 steps into the climb
    210
    """
    return [_event(s, found) for s, found in _shifts(view(run), cfg)]


def alarm_step(run: Run | RunView, cfg: DiagnoseConfig) -> int | None:
    """The first logged step at which the statistic alarms on any mismatch metric (the live
    guard's earliest precision alert through it: it reads points up to each step only)."""
    steps = [int(s.steps[s.finite][found.alarm]) for s, found in _shifts(view(run), cfg)]
    return min(steps) if steps else None


def _shifts(rv: RunView, cfg: DiagnoseConfig) -> list[tuple[Series, Shift]]:
    """Each mismatch metric's series with the statistic's first alarm on it, where it alarms."""
    found = []
    for metric in rv.mismatch_metrics:
        s = rv.get(metric)
        hit = shift(s, cfg.mismatch) if s is not None else None
        if s is None or hit is None:
            continue
        # a correlation that moved with the probabilities' spread alone alarms nothing
        at = int(s.steps[s.finite][hit.onset])
        if not spread_artefact(rv, metric, at, cfg.mismatch):
            found.append((s, hit))
    return found


def shift(s: Series, c: MismatchConfig) -> Shift | None:
    """The first alarm of the statistic on ``s`` (see the module docstring), or None."""
    ok = s.finite
    x, steps = s.values[ok], s.steps[ok]
    if x.size < MIN_BASE_POINTS + GUARD_POINTS + 1:
        return None
    # the floor under which values are one level is read from the reference points only
    y = _badness(s.name, _floor(s.name, x[:BASE_POINTS], c))(x)
    order = _order(s.name)
    negligible = float(np.log(NEGLIGIBLE))
    total, start = 0.0, -1
    level = sigma = float("nan")
    fixed = False
    for i in range(MIN_BASE_POINTS + GUARD_POINTS, y.size):
        if total <= 0.0 and not fixed:
            # a young series' reference grows with it until it has BASE_POINTS points; it is
            # not moved while an excursion lasts (a change is measured against the level
            # it left)
            ref = y[: min(i - GUARD_POINTS, BASE_POINTS)]
            level = float(np.median(ref))
            sigma = max(1.4826 * float(np.median(np.abs(ref - level))), SIGMA_FLOOR)
            fixed = ref.size >= BASE_POINTS
        z = min((float(y[i]) - level) / sigma, Z_CAP)
        total = max(0.0, total + z - DRIFT)
        if total <= 0.0:
            start = -1
            continue
        if start < 0:
            start = i
        if total < THRESHOLD:
            continue
        now = _level(y, steps, i, base=level, floor=level + SHIFT_Z * sigma)
        rise = now - level
        fast_gate = max(order * float(np.log(c.shift_fold)), SHIFT_Z * sigma)
        if rise < fast_gate or now < order * negligible:
            continue
        then = _then(steps, y, i)
        if then is not None and now - then >= FAST_PART * rise:
            # the onset is measured from the level the change left (the reference, or the
            # level just before the rise when noise had wandered above it)
            floor = max(level, then) + max(LEFT_Z * sigma, 0.25 * fast_gate)
            return Shift(i, _left(y, start, i, floor), level, sigma, now, total)
    return None


def _level(y: np.ndarray, steps: np.ndarray, i: int, *, base: float, floor: float) -> float:
    """The level at point ``i`` that must stand past the gate: the median of the last
    :data:`LEVEL_POINTS` points, or of those of the last :data:`LEVEL_STEPS` steps when they
    are more. A median of three points ten steps apart lags a climb by a log interval, which a
    sparse log cannot afford: when the last :data:`CLIMB_POINTS` points span
    :data:`LEVEL_STEPS` steps or more, climb (each above the one before), all stand at
    ``floor`` or more and the point before them does not (the climb is what left the level),
    the level is the last point, but no higher than the line through the two before it (a
    spike on top of a wobble is read as the wobble's trend)."""
    first = min(
        i + 1 - LEVEL_POINTS, int(np.searchsorted(steps, steps[i] - LEVEL_STEPS, side="right"))
    )
    now = float(np.median(y[max(first, 0) : i + 1]))
    k = i + 1 - CLIMB_POINTS
    if k < 1 or steps[i] - steps[k] < LEVEL_STEPS:
        return now
    tail = y[k : i + 1]
    if float(tail[0]) >= floor and bool(np.all(np.diff(tail) > 0)):
        climbed = min(float(y[i]), 2.0 * float(y[i - 1]) - float(y[i - 2]))
        if climbed - float(y[k - 1]) >= CLIMB_SHARE * (climbed - base):
            now = max(now, climbed)
    return now
    if float(tail[0]) >= floor and bool(np.all(np.diff(tail) > 0)):
        now = max(now, min(float(y[i]), 2.0 * float(y[i - 1]) - float(y[i - 2])))
    return now


def _left(y: np.ndarray, start: int, alarm: int, floor: float) -> int:
    """Where the series left its level for good: the first point of the last stretch up to
    ``alarm`` whose level (medians of 3, centred) stands at ``floor`` or more (a climb that
    wobbled near its level first does not pull it early), not before the excursion's start."""
    smooth = np.array(
        [
            float(np.median(y[max(j - 1, 0) : min(j + 2, alarm + 1)]))
            for j in range(start, alarm + 1)
        ]
    )
    below = np.flatnonzero(smooth < floor)
    # at the alarm point at the latest (a climb read at its last point may smooth below it)
    return min(start + (int(below[-1]) + 1 if below.size else 0), alarm)


def _then(steps: np.ndarray, y: np.ndarray, i: int) -> float | None:
    """The level :data:`FAST_SHARE` of the steps so far before point ``i``: the median of the
    points within :data:`THEN_SHARE` of the steps so far around it (at least 3); None when
    that is before the series' second point. A change is fast when at least
    :data:`FAST_PART` of its rise came after it."""
    elapsed = float(steps[i] - steps[0])
    then_step = steps[i] - FAST_SHARE * elapsed
    j = int(np.searchsorted(steps, then_step, side="right")) - 1
    if j < 1:
        return None
    lo = int(np.searchsorted(steps, then_step - THEN_SHARE * elapsed, side="left"))
    hi = int(np.searchsorted(steps, then_step + THEN_SHARE * elapsed, side="right"))
    lo, hi = min(lo, j - 1), max(hi, j + 2)
    return float(np.median(y[max(lo, 0) : min(hi, i + 1)]))


def _event(s: Series, found: Shift) -> Event:
    steps = s.steps[s.finite]
    onset, alarm = int(steps[found.onset]), int(steps[found.alarm])
    fold = float(np.exp(found.now - found.level))
    return Event(
        "mismatch_shift",
        s.name,
        onset,
        None,
        "critical",
        0.7,
        f"{s.name} leaves its early level from step {onset}: by step {alarm} its disagreement "
        f"is {fold:.3g}× its first points' (a CUSUM of its log on the run's own noise, "
        f"σ {found.sigma:.3g}, reached {found.statistic:.1f} σ)",
    )
