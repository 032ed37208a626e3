"""Short windows: a blow-up in a log too short for the window-based detectors.

Excerpts pasted into issue threads hold 2-20 logged points. The divergence detector needs a
level before and after a change (at least a few points each) and says nothing there, yet an
engineer reads ``lm loss 3.3 -> 7.6 while the grad norm goes x14 in five steps`` at a glance.
For a series with fewer than :data:`SHORT_POINTS` finite points (each excerpt on its own,
where the steps jump) this detector compares the level the window starts at (the lowest of
its first third) with the highest of its later
points, and calls a blow-up when the rise is large in both relative and absolute terms and
neither the window nor a later excerpt is back at its level (a spike that returned, like
BLOOM 176B's grad norm 0.24 -> 960 and back, is the spike detector's):

- a loss (``loss``, ``perplexity``: positive, in nats or exp-nats) rising by at least
  :data:`LOSS_RATIO` x *and* :data:`LOSS_NATS` nats (perplexity: its log): an LM loss that
  gains one nat has lost e times in likelihood, and no warm-up raises it;
- a grad norm rising by at least :data:`GRAD_RATIO` x: a healthy grad norm falls after the
  first steps or drifts by a few x over thousands of steps (docs/failures.md, "Loss
  divergence": grad-norm spikes precede the loss in BigScience's runs).

The event's confidence says how little data there is: it grows with the number of points,
from :data:`MIN_CONFIDENCE` at 2 points to :data:`MAX_CONFIDENCE` at :data:`SHORT_POINTS`.
"""

from __future__ import annotations

import numpy as np

from proxydiag.diagnose._warmup import GROWTH_FALLBACK_FRACTION, warmup_end
from proxydiag.diagnose.config import DiagnoseConfig
from proxydiag.diagnose.detectors.nonfinite import calibration_end_of
from proxydiag.diagnose.view import RunView, Series, view
from proxydiag.events import Event
from proxydiag.run import Run

#: fewer finite points than this is a short window (the window detectors need more)
SHORT_POINTS = 24
#: a loss blow-up: at least this ratio and this many nats over the window's starting level
LOSS_RATIO = 1.5
LOSS_NATS = 1.0
#: a grad-norm blow-up: at least this ratio over the window's starting level
GRAD_RATIO = 10.0
#: a window that ends within this factor of its starting level has recovered
RECOVERED = 1.1
#: a window that starts with training is a run's first points, not an excerpt quoted for its
#: blow-up (a live run's first checks): a blow-up must hold on its last HOLD_POINTS points,
#: each at least HOLD_SHARE of the way up (in log) to its ratio — a healthy run's grad norm
#: spikes 8-12x for a logged point or two and comes back, and so may a loss
HOLD_POINTS = 3
HOLD_SHARE = 0.5
#: the climb starts after the last point within this fraction of the way up to the peak
LEFT = 0.1
MIN_CONFIDENCE = 0.4
MAX_CONFIDENCE = 0.8


NAME = "short"
#: its events decide labels (loss_divergence)
DECIDES = True


def reads(cfg: DiagnoseConfig) -> tuple[str, ...]:
    """The canonical metrics :func:`detect` reads (a learning rate for the warm-up)."""
    from proxydiag.diagnose.detectors import nonfinite

    # the end of a loss scale's calibration is the non-finite detector's reading
    return ("grad_norm", "loss", "pg_loss", "perplexity", "lr", *nonfinite.reads(cfg))


def detect(run: Run | RunView, cfg: DiagnoseConfig) -> list[Event]:
    """A ``divergence`` event per short series that blows up (the taxonomy's divergence).

    >>> from proxydiag.diagnose.view import from_arrays
    >>> v = from_arrays({"loss": ([8738, 8739, 8740, 8741, 8742, 8743],
    ...                           [3.32, 3.42, 3.68, 7.27, 4.13, 7.60])})
    >>> [(e.kind, e.onset_step, e.confidence) for e in detect(v, DiagnoseConfig())]
    [('divergence', 8741, 0.47)]
    """
    rv = view(run)
    # the loss scaler's start-up calibration is no starting level: a step it did not skip
    # there has scaled-down gradients (a real fp16 GRPO run's grad norm read 0.0008 at step 6
    # of a 14-step calibration, then ~1: a "x1,500 blow-up" of a healthy run)
    calibrated = calibration_end_of(rv, cfg)
    warm = warmup_end(rv, fallback_fraction=GROWTH_FALLBACK_FRACTION)
    events = []
    for name, log_scale, ratio, nats in (
        ("loss", False, LOSS_RATIO, LOSS_NATS),
        ("perplexity", True, LOSS_RATIO, LOSS_NATS),
        ("grad_norm", False, GRAD_RATIO, 0.0),
    ):
        s = rv.get(name)
        if s is None:
            continue
        # a window that starts with training (or with the end of the scaler's calibration) is
        # a run's first points, not an excerpt quoted for its blow-up
        young = calibrated is not None or bool(len(s) and s.steps[0] <= max(1.0, rv.interval))
        hold = HOLD_POINTS if young else 0
        if calibrated is not None:
            after = s.steps > calibrated
            s = Series(s.name, s.steps[after], s.values[after])
        if name == "grad_norm" and (
            calibrated is not None or (len(s) and s.steps[0] <= max(1.0, rv.interval))
        ):
            # a window that starts with training (or with the end of the scaler's
            # calibration): the learning-rate warm-up is no baseline either, and a grad norm
            # that has not settled is the optimiser or the policy starting (GRPO's first
            # batches have no advantage when every completion scores the same: 0.012 -> 1.2
            # in 15 steps of a healthy TRL run; a generated healthy run's 0.25 -> 4 while its
            # lr warmed up), not a blow-up; the loss still is judged
            after = s.steps > warm
            s = Series(s.name, s.steps[after], s.values[after])
            if not _settled(s):
                continue
        found = [
            e
            for part in _excerpts(s)
            if (e := _blow_up(part, s, log_scale=log_scale, ratio=ratio, nats=nats, hold=hold))
            is not None
        ]
        if found:
            events.append(found[0])
    return events


#: a step gap this many times the series' median gap separates two excerpts
EXCERPT_GAP = 20


def _excerpts(s: Series) -> list[Series]:
    """The series cut where its steps jump (excerpts of one log quoted side by side).

    >>> parts = _excerpts(Series("loss", np.array([1, 2, 3, 900, 901]), np.ones(5)))
    >>> [p.steps.tolist() for p in parts]
    [[1, 2, 3], [900, 901]]
    """
    if len(s) < 3:
        return [s]
    gaps = np.diff(s.steps)
    cuts = np.flatnonzero(gaps > EXCERPT_GAP * max(float(np.median(gaps)), 1.0)) + 1
    return [
        Series(s.name, st, v)
        for st, v in zip(np.split(s.steps, cuts), np.split(s.values, cuts), strict=True)
    ]


def _blow_up(
    s: Series, whole: Series, *, log_scale: bool, ratio: float, nats: float, hold: int = 0
) -> Event | None:
    """The blow-up of excerpt ``s`` of ``whole``, unless it ends, or a later excerpt is, back
    at its starting level; with ``hold``, unless its last ``hold`` points do not all stand
    :data:`HOLD_SHARE` of the way up (in log) to the blow-up's ratio."""
    ok = np.isfinite(s.values) & (s.values > 0)
    steps, values = s.steps[ok], s.values[ok]
    n = values.size
    if n < 2 or n >= SHORT_POINTS:
        return None
    losses = np.log(values) if log_scale else values  # perplexity -> its loss, in nats
    head = max(1, n // 3)
    base = float(losses[:head].min())
    later = losses[head:]
    peak = float(later.max())
    rise_ratio = peak / base if base > 0 else np.inf
    if rise_ratio < ratio or peak - base < nats:
        return None
    rest = whole.values[(whole.steps > steps[-1]) & np.isfinite(whole.values) & (whole.values > 0)]
    rest = np.log(rest) if log_scale else rest
    if losses[-1] <= RECOVERED * base or (rest <= RECOVERED * base).any():
        return None  # back at its level: a spike (the spike detector's), not a blow-up
    if hold and (n < hold or bool((losses[-hold:] < base * ratio**HOLD_SHARE).any())):
        return None  # a run's first steps: one or two high points may still come back
    # onset: where the climb to the peak leaves the starting level for good: the point after
    # the last one before the peak still within LEFT of the way up, read on the running
    # median of 3 (a one-point spike on the way that came back down is not its start: it
    # was dated there, 50 steps early, in a 23-point grad norm that spiked x4 and fell back
    # before it climbed x10; nor is a one-point dip inside the climb its start)
    level = _median3(losses)
    top = head + int(np.argmax(level[head:]))
    near = np.flatnonzero(level[:top] <= base + LEFT * (peak - base))
    up = int(near[-1]) + 1 if near.size else head
    conf = round(
        MIN_CONFIDENCE + (MAX_CONFIDENCE - MIN_CONFIDENCE) * (n - 2) / (SHORT_POINTS - 2), 2
    )
    shown = np.exp if log_scale else (lambda x: x)
    return Event(
        "divergence",
        s.name,
        int(steps[up]),
        int(steps[-1]),
        "critical",
        conf,
        f"{s.name} rises from {float(shown(base)):.4g} to {float(shown(peak)):.4g} "
        f"({float(shown(peak)) / float(shown(base)):.3g}x) within {n} logged points "
        f"(steps {int(steps[0])}-{int(steps[-1])}); a window this short is judged on what it "
        f"shows: confidence {conf:.2f} for {n} points",
    )


#: a starting level is settled when the first third of the window stays within this ratio ...
SETTLED_RATIO = 2.0
#: ... over at least this many points (one point is no level: a generated healthy run's grad
#: norm went 7 -> 335 -> 3 in the four steps after its warm-up)
LEVEL_POINTS = 2


def _settled(s: Series) -> bool:
    """True when the first third of the series' positive finite points holds at least
    :data:`LEVEL_POINTS` points within :data:`SETTLED_RATIO` of each other (a level to measure
    a blow-up from), False while it is still moving or too short to say.

    >>> _settled(Series("g", np.arange(6), np.array([0.4, 0.3, 0.35, 0.3, 3.0, 9.0])))
    True
    >>> _settled(Series("g", np.arange(6), np.array([0.01, 0.05, 0.2, 0.6, 1.0, 1.2])))
    False
    """
    values = s.values[np.isfinite(s.values) & (s.values > 0)]
    head = values[: max(1, values.size // 3)]
    return head.size >= LEVEL_POINTS and float(head.max()) <= SETTLED_RATIO * float(head.min())


def _median3(values: np.ndarray) -> np.ndarray:
    """Running median of three points (the first and last points as they are).

    >>> _median3(np.array([1.0, 9.0, 1.0, 2.0, 8.0, 9.0])).tolist()
    [1.0, 1.0, 2.0, 2.0, 8.0, 9.0]
    """
    if values.size < 3:
        return values.copy()
    trios = np.stack([values[:-2], values[1:-1], values[2:]])
    return np.concatenate([values[:1], np.median(trios, axis=0), values[-1:]])
