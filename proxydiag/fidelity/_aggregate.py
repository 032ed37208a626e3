"""From test results to a metric's score and verdict, and from metrics and faults to the verdict.

**Metric score**: the weighted mean of its test scores (trend 0.35, shape 0.25, volatility 0.25,
increments 0.15; level 0: reported only). Its interval is the percentile interval of the same
weighted mean over the shared block-bootstrap replicates (resamples of blocks of aligned grid
points, the same resamples for every test of the metric). ``seed_baseline`` is the score a typical
seed pair gets. Verdict from the score: ``faithful`` ≥ 0.6, ``diverged`` < 0.3, ``drifted``
between, and at least ``drifted`` when one test scores < 0.3 (its discrepancy is > 3.3× the seed
range); opposite trend directions are ``diverged``.

**Overall**: ``dynamics`` = mean of metric scores, key metrics (reward, entropy, KL, grad norm,
losses, response length, clip fraction) weighted 2, metrics that differ by design (throughput,
step time, counters, lr) weighted 0. Verdict rules (the issue's):

1. the proxy misses the full run's fault, shows it > 10% of progress earlier or later, shows a
   different fault, or fails where the full run is healthy → ``unfaithful``;
2. the full run learns (reward up, else loss down, by ≥ ``learn_min_sigma`` σ) and a healthy
   proxy does not (less than ``learn_min_fraction`` of the full run's change, or less than
   ``learn_min_sigma`` σ of its own noise unless it gains ``learn_noisy_fraction`` of the full
   run's change by at least half that many σ: a noisier proxy that learns) → ``unfaithful``;
3. otherwise two or more key metrics (or mismatch metrics) not faithful, one diverged, the
   symptoms in another order than the seeds agree on (:mod:`~proxydiag.fidelity._symptom_order`), or
   dynamics < ``partial_below`` (0.8) → ``partial``;
4. otherwise ``faithful``.

``fidelity`` = dynamics, times ``unfaithful_factor`` (0.3) when unfaithful. A metric without a
finite point in any run is undecidable: it is left out (and named in the reasons). When no curve
could be compared, the verdict rests on what is decidable: the events score (co-occurrence of
non-finite bursts, overflows and diagnosed symptoms) stands in for dynamics when either run has
events — identical all-NaN runs score 1; without any event dynamics is 0.5 ("unknown"), which
makes a proxy at best partial: its dynamics were not confirmed.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import numpy.typing as npt

from proxydiag.fidelity._scoring import fmt, verdict
from proxydiag.fidelity._stats import percentile_ci
from proxydiag.fidelity.config import FidelityConfig
from proxydiag.fidelity.fault_match import seeds_split
from proxydiag.fidelity.result import (
    FaultComparison,
    MetricFidelity,
    MetricVerdict,
    TestResult,
    Verdict,
)
from proxydiag.metrics import is_mismatch

Floats = npt.NDArray[np.float64]


def metric_fidelity(
    metric: str, tests: Mapping[str, TestResult], config: FidelityConfig
) -> MetricFidelity:
    """Combine one metric's tests."""
    weights = {k: config.test_weights.get(k, 0.0) for k in tests}
    scored = {k: t for k, t in tests.items() if weights[k] > 0}
    total = sum(weights[k] for k in scored) or 1.0
    score = sum(weights[k] * t.score for k, t in scored.items()) / total
    reps = (
        sum(
            weights[k]
            * np.asarray(t.samples if t.samples is not None else t.score, dtype=np.float64)
            for k, t in scored.items()
        )
        / total
    )
    ci = percentile_ci(np.atleast_1d(np.asarray(reps, dtype=np.float64)), level=config.ci_level)
    ci = (min(ci[0], score), max(ci[1], score))
    seed = (
        sum(weights[k] * float(t.details.get("seed_score", 1.0)) for k, t in scored.items()) / total
    )
    opposite = any(t.details.get("opposite_direction") for t in scored.values())
    worst: MetricVerdict = "diverged" if opposite else verdict(score, config)
    if worst == "faithful" and any(t.score < config.diverged_score for t in scored.values()):
        worst = "drifted"  # one test far outside the seed range is enough to doubt the metric
    weakest = min(scored.values(), key=lambda t: t.score) if scored else None
    words = (
        f"{metric}: {worst}, score {fmt(score)} [{fmt(ci[0])}, {fmt(ci[1])}], "
        f"seed pairs {fmt(seed)}"
    )
    if weakest is not None and weakest.score < 1:
        words += f"; weakest: {weakest.explanation}"
    return MetricFidelity(metric, score, ci, seed, worst, dict(tests), words)


def metric_weight(metric: str, config: FidelityConfig) -> float:
    """Weight of a metric in the overall score (2 key, 0 unscored, 1 otherwise)."""
    if metric in config.unscored_metrics:
        return 0.0
    return 2.0 if metric in config.key_metrics else 1.0


def dynamics(metrics: Mapping[str, MetricFidelity], config: FidelityConfig) -> float:
    """Weighted mean of the metric scores (0.5, "unknown", when no curve could be compared; the
    unweighted mean when only unscored metrics could)."""
    if not metrics:
        return 0.5
    weights = {m: metric_weight(m, config) for m in metrics}
    total = sum(weights.values())
    if total == 0:
        return sum(f.score for f in metrics.values()) / len(metrics)
    return sum(weights[m] * f.score for m, f in metrics.items()) / total


def learning_gap(metrics: Mapping[str, MetricFidelity], config: FidelityConfig) -> str | None:
    """Why a proxy does not learn where the full run does (None when it does, or can't tell)."""
    for metric, sign in (("reward", 1.0), ("loss", -1.0)):
        trend = metrics[metric].tests.get("trend") if metric in metrics else None
        if trend is None:
            continue
        d = trend.details
        z_full, z_proxy = d.get("change_sigma_full"), d.get("change_sigma_proxy")
        if (
            z_full is None
            or z_proxy is None
            or sign * z_full < config.learn_min_sigma
            or not d.get("change_full")
        ):  # a change that rounds to 0 on a tiny scale
            return None
        fraction = sign * d["change_proxy"] / abs(d["change_full"])
        # a noisier proxy that gains most of the full run's change learns: its noise is a
        # matter of dynamics (volatility), not of learning
        noisy_but_learns = (
            sign * z_proxy >= config.learn_min_sigma / 2 and fraction >= config.learn_noisy_fraction
        )
        if fraction < config.learn_min_fraction or (
            sign * z_proxy < config.learn_min_sigma and not noisy_but_learns
        ):
            return (
                f"does not learn: full run's {metric} changes {z_full:+.1f}σ, the proxy's "
                f"{z_proxy:+.1f}σ ({fraction:.0%} of the full run's change)"
            )
        return None
    return None


def overall(
    metrics: Mapping[str, MetricFidelity],
    faults: FaultComparison,
    config: FidelityConfig,
    events: TestResult | None = None,
) -> tuple[float, Verdict, tuple[str, ...]]:
    """``(fidelity, verdict, reasons)`` by the rules in the module docstring."""
    by_events = not metrics and events is not None and has_events(events)
    dyn = events.score if by_events and events is not None else dynamics(metrics, config)
    score_name = "events score" if by_events else "dynamics score"
    reasons: list[str] = []
    order_differs = bool(events is not None and events.details.get("order_differs"))
    if order_differs and events is not None:
        reasons.append("symptoms in another order than in the full run: " + events.explanation)
    unfaithful = False
    if faults.outcome not in ("", "reproduced"):
        unfaithful = True
        reasons.append(faults.explanation)
    proxy_healthy = faults.proxy.get("label") in (None, "healthy")
    full_healthy = faults.full.get("label") in (None, "healthy")
    gap = learning_gap(metrics, config) if proxy_healthy and full_healthy else None
    if gap:
        unfaithful = True
        reasons.append(gap)
    off = [
        m
        for m, f in metrics.items()
        if f.verdict != "faithful" and (m in config.key_metrics or is_mismatch(m))
    ]
    dynamics_off = len(off) >= config.partial_min_metrics or any(
        metrics[m].verdict == "diverged" for m in off
    )
    if off:
        reasons.append(
            "dynamics outside the seed-to-seed range: "
            + "; ".join(f"{m} {metrics[m].verdict} ({metrics[m].score:.2f})" for m in off)
        )
    if dyn < config.partial_below:
        reasons.append(f"{score_name} {dyn:.2f} < {config.partial_below}")
    split = faults.outcome == "reproduced" and seeds_split(faults.full.get("seeds") or [])
    if split:  # the proxy reproduces what some seeds show, not what the full run does
        reasons.append(
            "the full seeds disagree (" + ", ".join(faults.full["seeds"]) + "): "
            "the proxy reproduces some of them"
        )
    if unfaithful:
        return dyn * config.unfaithful_factor, "unfaithful", tuple(reasons)
    if dynamics_off or order_differs or split or dyn < config.partial_below:
        return dyn, "partial", tuple(reasons)
    agree = (
        f"no curve could be compared; the symptoms co-occur ({score_name} {dyn:.2f}) and the "
        "fault comparison agrees"
        if by_events
        else f"dynamics within the seed-to-seed range (score {dyn:.2f})"
    )
    return dyn, "faithful", tuple(reasons) or (agree,)


def has_events(events: TestResult) -> bool:
    """True when the full run or the proxy has a symptom event (so co-occurrence is decidable)."""
    return bool(events.details.get("full") or events.details.get("proxy"))
