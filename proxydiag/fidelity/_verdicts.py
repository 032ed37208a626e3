"""A phase's verdict, looking at its worst key metric, and the phases combined.

**No averaging away.** A metric's score is the weighted mean of its tests (:mod:`.aggregate`),
but in a phase a key metric is ``diverged`` when one of its ``diverged_tests`` (volatility,
increments: statistics of the noise itself, not of a curve's shape, which a flat noisy metric
makes arbitrary) lies far outside seed-to-seed noise: a score below ``1 / diverged_factor`` (its
discrepancy more than twice the seed range) with a bootstrap interval that excludes the seed range
(the best replicate is still outside it), or a level ratio ``level_diverged_ratio`` (3×) beyond the
seeds' own ratios — when the metric has at least ``diverged_min_points`` aligned points in the
phase. This holds in the pre-fault and whole phases; in the fault phase the response (how far grad
norms climb, how noisy the collapse is) varies between seeds beyond what two or three seeds bound,
so the fault phase is partial only when its mean score is below ``partial_below``; its class and
timing are the fault test's.

**A phase's verdict** (``whole``, ``pre_fault`` or ``fault``):

1. ``undecidable`` when too short (:mod:`.phases`) or no curve could be scored in it;
2. ``unfaithful`` when, before the fault, the proxy does not learn where the full run does
   (:func:`.progress.not_learning`; for a healthy run the whole-run rule of
   :func:`.aggregate.learning_gap` applies, as before phases);
3. ``partial`` when one key metric diverged (incl. learning progress that is off:
   :mod:`.progress`), two or more are not faithful, or its dynamics score < ``partial_below``.
   A phase whose metrics have fewer than ``phase_min_points`` (20) aligned points is *sparse*:
   there only the robust rules hold (a level beyond the seeds', learning less or more), not
   the scores, which a few points make arbitrary;
4. ``faithful`` otherwise.

A phase's ``fidelity`` is its dynamics score (key metrics weighted 2) made to agree with its
verdict as the comparison's is: times ``unfaithful_factor`` when unfaithful, at most
``partial_below`` when partial; its interval likewise.

**Combined**: the comparison's ``fidelity`` is the smaller of its decidable phases' scores, so
one poor phase lowers it; its verdict is at best the worst decidable phase's (an undecidable
phase is named in the reasons, never counted as agreement).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from proxydiag.fidelity import _progress
from proxydiag.fidelity._aggregate import dynamics, metric_weight
from proxydiag.fidelity._stats import percentile_ci
from proxydiag.fidelity.config import FidelityConfig
from proxydiag.fidelity.phases import FAULT, PRE_FAULT, Phase
from proxydiag.fidelity.result import MetricFidelity, PhaseFidelity, PhaseVerdict, TestResult

_RANK: dict[str, int] = {"faithful": 0, "undecidable": 0, "partial": 1, "unfaithful": 2}


def far_outside(test: TestResult, config: FidelityConfig) -> bool:
    """A scored test far outside the seed range, its interval excluding that range."""
    if test.samples is None or test.score >= 1 / config.diverged_factor:
        return False
    samples = np.atleast_1d(np.asarray(test.samples, dtype=np.float64))
    return percentile_ci(samples, level=config.ci_level)[1] < 1.0


def level_beyond(test: TestResult, config: FidelityConfig) -> bool:
    """A level ratio ``level_diverged_ratio`` beyond the seeds' own ratios."""
    seeds = [abs(np.log(b)) for b in test.details.get("seed_levels", []) if b and b > 0]
    if test.details.get("kind") != "ratio" or test.value is None or not test.value > 0:
        return False
    return bool(
        abs(np.log(test.value)) > np.log(config.level_diverged_ratio) + max(seeds, default=0.0)
    )


def sharpen(m: MetricFidelity, config: FidelityConfig) -> MetricFidelity:
    """``m`` made ``diverged`` when one of its tests is far outside the seed range."""
    if m.metric not in config.key_metrics or m.verdict == "diverged":
        return m
    shape = m.tests.get("shape")
    # a handful of points: the spread of their changes is too uncertain to call it far off
    enough = shape is None or shape.details.get("points", 0) >= config.diverged_min_points
    far = [
        t
        for k, t in m.tests.items()
        if enough and k in config.diverged_tests and far_outside(t, config)
    ]
    level = m.tests.get("level")
    if level is not None and level_beyond(level, config):
        far.append(level)
    if not far:
        return m
    why = "; ".join(t.explanation for t in far)
    return replace(
        m,
        verdict="diverged",
        explanation=f"{m.explanation}; diverged, far outside the seed range: {why}",
    )


def judge(
    phase: Phase,
    metrics: Mapping[str, MetricFidelity],
    learning: Mapping[str, Any],
    config: FidelityConfig,
) -> PhaseFidelity:
    """The verdict of one phase by the rules of the module docstring."""
    if phase.undecidable or not metrics:
        why = phase.undecidable or (
            "undecidable: no metric has phase_min_points finite points in every run of this phase"
        )
        return PhaseFidelity(
            phase.name,
            phase.progress,
            "undecidable",
            None,
            None,
            dict(metrics),
            dict(learning),
            (why,),
        )
    # the fault's response varies between seeds: judged there by the mean
    metrics = {m: sharpen(f, config) if phase.name != FAULT else f for m, f in metrics.items()}
    score = dynamics(metrics, config)
    reasons: list[str] = []
    verdict: PhaseVerdict = "faithful"
    gap = _progress.not_learning(learning, config) if phase.name == PRE_FAULT else None
    if gap:
        verdict = "unfaithful"
        reasons.append(gap)
    points = _points(metrics)
    sparse = points < config.phase_min_points  # only the robust rules: levels and learning
    lagging = _progress.off(learning, pace=not sparse) if phase.name != FAULT else {}
    reasons += [f"learning: {why}" for why in lagging.values()]
    key_off = [
        m
        for m, f in metrics.items()
        if m in config.key_metrics
        and (f.verdict != "faithful" if not sparse else _level_off(f, config))
    ]
    diverged = [m for m in key_off if metrics[m].verdict == "diverged"] + list(lagging)
    if key_off:
        reasons.append(
            "outside the seed-to-seed range: "
            + "; ".join(f"{m} {metrics[m].verdict} ({metrics[m].score:.2f})" for m in key_off)
        )
    if sparse:
        reasons.append(
            f"{points} points < phase_min_points ({config.phase_min_points}): only levels and "
            "learning progress are judged in this phase"
        )
    elif score < config.partial_below:
        reasons.append(f"dynamics score {score:.2f} < {config.partial_below}")
    if phase.name == FAULT:  # the response is judged by its mean (and by the fault test)
        diverged, loose = [], score >= config.partial_below
    else:
        loose = sparse or (
            len(key_off) < config.partial_min_metrics and score >= config.partial_below
        )
    if verdict == "faithful" and (diverged or not loose):
        verdict = "partial"
    lo, hi = _ci(metrics, config)
    fidelity = _agreeing(score, verdict, config)
    return PhaseFidelity(
        phase.name,
        phase.progress,
        verdict,
        fidelity,
        (
            min(_agreeing(lo, verdict, config), fidelity),
            max(_agreeing(hi, verdict, config), fidelity),
        ),
        metrics,
        dict(learning),
        tuple(reasons) or (f"dynamics within the seed-to-seed range (score {score:.2f})",),
    )


def _level_off(m: MetricFidelity, config: FidelityConfig) -> bool:
    """The metric's level lies beyond the seeds' (the one test a sparse phase still trusts)."""
    level = m.tests.get("level")
    return level is not None and level_beyond(level, config)


def _points(metrics: Mapping[str, MetricFidelity]) -> int:
    """The most aligned points any metric of the phase has (its shape test counts them)."""
    counts = [
        int(t.details.get("points", 0)) for f in metrics.values() if (t := f.tests.get("shape"))
    ]
    return max(counts, default=0)


def _agreeing(score: float, verdict: PhaseVerdict, config: FidelityConfig) -> float:
    """A phase's score made to agree with its verdict, as the comparison's is: times
    ``unfaithful_factor`` when unfaithful, at most ``partial_below`` when partial."""
    if verdict == "unfaithful":
        return score * config.unfaithful_factor
    return min(score, config.partial_below) if verdict == "partial" else score


def combine(phases: Sequence[PhaseFidelity]) -> tuple[float | None, PhaseVerdict, tuple[str, ...]]:
    """``(fidelity, worst verdict, reasons)`` over the decidable phases (None, ``undecidable``
    when none is)."""
    decided = [p for p in phases if p.verdict != "undecidable"]
    if not decided:  # nothing compared at all: the whole run's reasons say why
        return None, "undecidable", ()
    reasons = tuple(f"{p.name} phase {p.reasons[0]}" for p in phases if p.verdict == "undecidable")
    worst = max(decided, key=lambda p: _RANK[p.verdict])
    reasons += tuple(
        f"{p.name} phase {p.verdict}: {'; '.join(p.reasons)}"
        for p in decided
        if p.verdict != "faithful"
    )
    return min(float(p.fidelity) for p in decided if p.fidelity is not None), worst.verdict, reasons


def _ci(metrics: Mapping[str, MetricFidelity], config: FidelityConfig) -> tuple[float, float]:
    """Weighted mean of the metrics' interval bounds (an interval of the phase score that
    treats the metrics' errors as fully dependent: conservative)."""
    weights = {m: metric_weight(m, config) for m in metrics}
    total = sum(weights.values())
    if total == 0:
        weights, total = dict.fromkeys(metrics, 1.0), float(len(metrics))
    lo = sum(weights[m] * f.ci[0] for m, f in metrics.items()) / total
    hi = sum(weights[m] * f.ci[1] for m, f in metrics.items()) / total
    return float(lo), float(hi)
