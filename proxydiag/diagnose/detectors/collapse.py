"""Policy collapse: RL symptoms leaving their range together, found by a CUSUM on each
symptom's own noise (docs/failures.md#policy-collapse).

An RL policy often collapses without a loss spike: reward falls to a fraction of its level,
entropy climbs (or falls) several-fold, KL and the clip fraction climb, the grad norm rises a
few-fold, over tens of steps, while the policy loss stays small. Each symptom alone moves in
healthy runs too (entropy falls as a policy sharpens, KL grows as it leaves its reference);
together, fast and against the run's own noise, they do not.

Each symptom gets a one-sided CUSUM (:mod:`._cusum`) after the warm-up; it is *out* from the
first point where its statistic has crossed the alarm level and its last two points both stand
beyond the symptom's size gate against the level the excursion left (``[collapse]``), within
a few dozen points of leaving it (a slow learning trend starts again from a fresh reference).
A collapse is a logged step where the reward is out, or the entropy climbing, together with
at least ``least_symptoms - 1`` other symptoms confirmed out with it (within
:data:`TOGETHER_POINTS` logged points or :data:`TOGETHER_STEPS` steps) that left their range
recently (:data:`RECENT_POINTS` points or :data:`RECENT_STEPS` steps). Its onset is the first point,
among those symptoms, that left its range for good (≥ 3 σ and half its gate out from there
on); a falling entropy sets it only when no other symptom can (a sharpening policy's entropy
falls too). The CUSUM reads
points up to each step only, so the live guard finds it as early as the data allow: a few
logged points after the symptoms break, where a change fit needs a stretch of them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from proxydiag.diagnose._cusum import cusum
from proxydiag.diagnose._stats import safe_log
from proxydiag.diagnose._warmup import warmup_end
from proxydiag.diagnose.config import DiagnoseConfig
from proxydiag.diagnose.view import RunView, view
from proxydiag.events import Event
from proxydiag.run import Run

#: a point has left its range at this many σ of the reference (the onset)
LEFT_RANGE_Z = 3.0
#: symptoms confirmed out of range within this many logged points (or TOGETHER_STEPS steps) of
#: each other left it together
TOGETHER_POINTS = 3
TOGETHER_STEPS = 20
#: ... having left it within this many logged points (or RECENT_STEPS steps) of the collapse
RECENT_POINTS = 8
RECENT_STEPS = 40
#: finite points a symptom needs to be judged
MIN_POINTS = 16


@dataclass(frozen=True)
class _Symptom:
    metric: str
    sign: int
    log: bool


SYMPTOMS = (
    _Symptom("reward", -1, False),
    _Symptom("entropy", 1, True),
    _Symptom("entropy", -1, True),
    _Symptom("kl", 1, True),
    _Symptom("clip_frac", 1, True),
    _Symptom("grad_norm", 1, True),
)


@dataclass(frozen=True)
class _Out:
    """A symptom out of range from ``confirmed`` to ``end`` (steps), having left it for good
    at ``onset``; ``before`` and ``after`` are the level it left and its last level."""

    symptom: _Symptom
    onset: int
    confirmed: int
    end: int
    before: float
    after: float

    def describe(self) -> str:
        s = self.symptom
        if s.log:
            before, after = float(np.exp(self.before)), float(np.exp(self.after))
            size = f"{after / before:.3g}×"
        else:
            before, after = self.before, self.after
            size = f"{after - before:+.3g}"
        return f"{s.metric} {before:.3g} -> {after:.3g} ({size}, from step {self.onset})"


NAME = "collapse"
#: its events decide labels (loss_divergence: a policy collapse)
DECIDES = True


def reads(cfg: DiagnoseConfig) -> tuple[str, ...]:
    """The canonical metrics :func:`detect` reads: its symptoms' (a learning rate for the
    warm-up)."""
    return (*dict.fromkeys(s.metric for s in SYMPTOMS), "lr")


def detect(run: Run | RunView, cfg: DiagnoseConfig) -> list[Event]:
    """One critical ``policy_collapse`` event at the first step the symptoms are out together.

    >>> from proxydiag.diagnose.view import from_arrays
    >>> rng = np.random.default_rng(0)
    >>> t = np.arange(0, 400, 10)
    >>> bad = t >= 300
    >>> arrays = {
    ...     "reward": (t, np.where(bad, 0.15, 0.6) + rng.normal(0, 0.02, t.size)),
    ...     "kl": (t, np.where(bad, 0.4, 0.03) * np.exp(rng.normal(0, 0.1, t.size))),
    ...     "clip_frac": (t, np.where(bad, 0.15, 0.005) * np.exp(rng.normal(0, 0.1, t.size))),
    ...     "grad_norm": (t, np.where(bad, 3.0, 0.3) * np.exp(rng.normal(0, 0.2, t.size))),
    ... }
    >>> [(e.kind, e.onset_step) for e in detect(from_arrays(arrays), DiagnoseConfig())]
    [('policy_collapse', 300)]
    >>> alarm_step(from_arrays(arrays), DiagnoseConfig())  # two points out: 300 and 310
    310
    """
    found = _collapse(view(run), cfg)
    return [] if found is None else [found[0]]


def alarm_step(run: Run | RunView, cfg: DiagnoseConfig) -> int | None:
    """The first logged step at which the statistic says the policy collapsed (the live
    guard's earliest alert for it: the statistic reads points up to each step only), or None."""
    found = _collapse(view(run), cfg)
    return None if found is None else found[1]


def _collapse(rv: RunView, cfg: DiagnoseConfig) -> tuple[Event, int] | None:
    c = cfg.collapse
    if not c.enabled:
        return None
    begin_step = warmup_end(rv)
    outs = [o for s in SYMPTOMS for o in _outs(rv, s, cfg, begin_step=begin_step)]
    if not outs:
        return None
    # symptoms leave their range together: confirmed out within TOGETHER_POINTS logged
    # points, or TOGETHER_STEPS steps, of each other
    # (in steps, never a share of the run: a live prefix judges as the whole run will)
    together = max(TOGETHER_POINTS * rv.interval, TOGETHER_STEPS)
    recent = max(RECENT_POINTS * rv.interval, RECENT_STEPS)
    for step in sorted({o.confirmed for o in outs}):
        live = [o for o in outs if o.confirmed <= step <= o.end]
        # ... having left it recently (a symptom that left long ago is a trend, not part of
        # this break)
        live = [o for o in live if o.confirmed >= step - together and o.onset >= step - recent]
        metrics = {o.symptom.metric for o in live}
        # the reward falling, or the entropy climbing: the symptoms healthy RL does not show
        # (its entropy falls as it sharpens, its KL grows as it leaves its reference)
        core = "reward" in metrics or any(
            o.symptom.metric == "entropy" and o.symptom.sign > 0 for o in live
        )
        if not core or len(metrics) < c.least_symptoms:
            continue
        # a falling entropy is what a sharpening policy does too: where it started falling
        # is the collapse's onset only when nothing else says
        timed = [o for o in live if not (o.symptom.metric == "entropy" and o.symptom.sign < 0)]
        first = min(timed or live, key=lambda o: o.onset)
        parts = "; ".join(o.describe() for o in sorted(live, key=lambda o: o.onset))
        confidence = min(0.9, 0.6 + 0.1 * (len(metrics) - c.least_symptoms))
        return (
            Event(
                "policy_collapse",
                first.symptom.metric,
                first.onset,
                None,
                "critical",
                confidence,
                f"policy collapse from step {first.onset}: {len(metrics)} RL symptoms out of "
                f"their range together by step {step} ({parts}); each left its own noise "
                "(a CUSUM on the run's own σ crossed its alarm level) and none had come back",
            ),
            step,
        )
    return None


def _outs(rv: RunView, s: _Symptom, cfg: DiagnoseConfig, *, begin_step: int) -> list[_Out]:
    """The stretches where symptom ``s`` is out of range (see the module docstring)."""
    series = rv.get(s.metric)
    if series is None:
        return []
    ok = series.finite
    steps, y = series.steps[ok], series.values[ok]
    if s.log:
        if (y <= 0).any():
            return []
        y = safe_log(y, floor=1e-12)
    if y.size < MIN_POINTS:
        return []
    begin = int(np.searchsorted(steps, begin_step))
    _, excursions = cusum(
        y,
        sign=s.sign,
        begin=begin,
        sigma_floor=1e-3 if s.log else 1e-9,
        gate=lambda level: _gate(level, s, cfg),
    )
    found = []
    for e in excursions:
        if e.confirmed is None:
            continue
        # where it left its range for good: the start of the last run of points >= 3 σ and
        # half the gate out (a trend that drifted a little first does not pull it early)
        move = s.sign * (y[e.start : e.confirmed + 1] - e.level)
        half = 0.5 * _gate(e.level, s, cfg)
        inside = np.flatnonzero((move < LEFT_RANGE_Z * e.sigma) | (move < half))
        left = min(e.start + (int(inside[-1]) + 1 if inside.size else 0), e.confirmed)
        found.append(
            _Out(
                s,
                int(steps[left]),
                int(steps[e.confirmed]),
                int(steps[e.end]),
                e.level,
                float(np.median(y[e.confirmed - 1 : e.end + 1])),
            )
        )
    return found


def _gate(level: float, s: _Symptom, cfg: DiagnoseConfig) -> float:
    """How far past ``level`` (in the series' scale, in the symptom's direction) a point must
    stand to count as out of range."""
    c = cfg.collapse
    if s.metric == "reward":
        return c.reward_fall * max(abs(level), 1e-12)
    fold = {"entropy": c.entropy_fold, "grad_norm": c.grad_fold}.get(
        s.metric, cfg.divergence.symptom_fold
    )
    if s.metric == "kl":
        # and past the level a healthy policy's KL reaches as it leaves its reference
        # ([divergence] kl_quiet_level, 0.02): 0.0016 -> 0.008 is 5x and no symptom
        quiet = float(np.log(cfg.divergence.kl_quiet_level)) - level
        return max(float(np.log(fold)), quiet)
    return float(np.log(fold))
