"""The whole-run view of a comparison that has phases, assembled from the phases' tests.

When the full seeds agree on a fault, every metric is tested in the ``pre_fault`` and the
``fault`` phase, each against seed-to-seed noise on that phase (:mod:`.phases`). The whole-run
table (``Comparison.metrics``) is then not tested a third time: each test of a metric is the
phases' results combined, weighted by the phases' share of progress —

* ``score``: the weighted mean of the phases' scores; its bootstrap replicates the weighted mean
  of theirs, row by row (the phases are resampled independently: a stratified bootstrap), so the
  metric's interval comes out of :func:`.aggregate.metric_fidelity` as before;
* ``value``, ``ci`` and ``seed_baseline``: the phase's own when one phase has the metric, else
  ``null`` (a Spearman ρ or a KS statistic of two ranges is not one number); every phase's
  statistic and interval are in the explanation (``reward trend: pre_fault: … | fault: …``)
  and in ``details["phases"]``.

So a fault no longer dominates the whole-run statistics (the reason phases exist), and the
phases together cost one whole-run analysis. An undecidable phase contributes nothing: it is
never counted as agreement.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from proxydiag.fidelity._aggregate import metric_fidelity
from proxydiag.fidelity.config import FidelityConfig
from proxydiag.fidelity.result import MetricFidelity, TestResult

#: a phase's name, its weight (share of progress) and its metrics
Part = tuple[str, float, Mapping[str, MetricFidelity]]


def whole_run(parts: Sequence[Part], config: FidelityConfig) -> dict[str, MetricFidelity]:
    """Every metric of any phase, its tests combined across the phases that have it.

    >>> from proxydiag.fidelity.result import TestResult as T
    >>> cfg = FidelityConfig()
    >>> def m(score):
    ...     return metric_fidelity("reward", {"trend": T("trend", 0.9, score)}, cfg)
    >>> whole = whole_run([("pre_fault", 0.6, {"reward": m(1.0)}), ("fault", 0.4,
    ...                    {"reward": m(0.5)})], cfg)
    >>> round(whole["reward"].score, 2), whole["reward"].tests["trend"].value
    (0.8, None)
    """
    names = list(dict.fromkeys(name for _, _, metrics in parts for name in metrics))
    out: dict[str, MetricFidelity] = {}
    for name in names:
        having = [(phase, w, metrics[name]) for phase, w, metrics in parts if name in metrics]
        total = sum(w for _, w, _ in having)
        weighted = [
            (phase, w / total if total > 0 else 1 / len(having), m) for phase, w, m in having
        ]
        tests = list(dict.fromkeys(t for _, _, m in having for t in m.tests))
        combined = {
            t: _test(name, t, [(p, w, m.tests[t]) for p, w, m in weighted if t in m.tests])
            for t in tests
        }
        out[name] = metric_fidelity(name, combined, config)
    return out


def _test(metric: str, name: str, parts: list[tuple[str, float, TestResult]]) -> TestResult:
    """One test's results in several phases as one (see the module docstring)."""
    if len(parts) == 1:
        return parts[0][2]
    total = sum(w for _, w, _ in parts)
    weights = [w / total for _, w, _ in parts]
    score = sum(w * t.score for w, (_, _, t) in zip(weights, parts, strict=True))
    samples = None
    if all(t.samples is not None for _, _, t in parts):
        rows = [np.atleast_1d(np.asarray(t.samples, dtype=np.float64)) for _, _, t in parts]
        n = min(r.size for r in rows)
        samples = sum(w * r[:n] for w, r in zip(weights, rows, strict=True))
    details: dict[str, object] = {
        "phases": {
            p: {"weight": round(w, 4), **t.details}
            for w, (p, _, t) in zip(weights, parts, strict=True)
        },
        "seed_score": sum(
            w * float(t.details.get("seed_score", 1.0))
            for w, (_, _, t) in zip(weights, parts, strict=True)
        ),
        # opposite directions in every phase (one phase's reversal is that phase's verdict)
        "opposite_direction": all(t.details.get("opposite_direction") for _, _, t in parts),
    }
    head = f"{metric} {name}: "
    words = head + " | ".join(f"{p}: {t.explanation.removeprefix(head)}" for p, _, t in parts)
    return TestResult(name, None, float(score), None, None, words, details, samples=samples)
