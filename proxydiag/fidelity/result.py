"""`TestResult`, `MetricFidelity`, `FaultComparison`, `PhaseFidelity`, `Comparison`
(docs/architecture.md#json-contracts; ``proxydiag/schemas/comparison.schema.json``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from proxydiag import display

#: version of the JSON contract (proxydiag/schemas/); optional keys added bump the minor
SCHEMA_VERSION = "1.1"

MetricVerdict = Literal["faithful", "drifted", "diverged"]
Verdict = Literal["faithful", "partial", "unfaithful"]


def _num(x: float | None) -> float | None:
    if x is None:
        return None
    x = float(x)
    return None if x != x else round(x, 6)  # NaN -> null in JSON (a score, not data)


def _clean(obj: Any) -> Any:
    """JSON-safe details: NaN/inf scores become null (data never passes through here)."""
    if isinstance(obj, float):
        return obj if obj == obj and abs(obj) != float("inf") else None
    if isinstance(obj, dict):
        return {str(k): _clean(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_clean(v) for v in obj]
    if hasattr(obj, "item") and callable(obj.item):  # numpy scalar
        return _clean(obj.item())
    return obj


@dataclass(frozen=True)
class TestResult:
    """One statistical test on one metric.

    ``value`` is the statistic (e.g. Spearman rho), ``score`` maps it to [0, 1] relative to the
    seed baseline, ``ci`` is its confidence interval, ``seed_baseline`` the same statistic
    between full-run seeds (or from a block bootstrap of the full run when there is one seed),
    ``explanation`` says it in words a reviewer can check.
    """

    __test__ = False  # a result, not a pytest test class (pytest collects Test* names)

    name: str
    value: float | None
    score: float
    ci: tuple[float, float] | None = None
    seed_baseline: float | None = None
    explanation: str = ""
    details: dict[str, Any] = field(default_factory=dict)
    #: bootstrap replicates of ``score`` (numpy array; not serialised), so that a metric's
    #: score gets a joint interval over its tests
    samples: Any = field(default=None, repr=False, compare=False)

    def to_dict(self) -> dict[str, Any]:
        return {
            "value": _num(self.value),
            "score": _num(self.score),
            "ci": [_num(self.ci[0]), _num(self.ci[1])] if self.ci else None,
            "seed_baseline": _num(self.seed_baseline),
            "explanation": self.explanation,
            "details": _clean(self.details),
        }


@dataclass(frozen=True)
class MetricFidelity:
    metric: str
    score: float
    ci: tuple[float, float]
    seed_baseline: float | None
    verdict: MetricVerdict
    tests: dict[str, TestResult]
    explanation: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "score": _num(self.score),
            "ci": [_num(self.ci[0]), _num(self.ci[1])],
            "seed_baseline": _num(self.seed_baseline),
            "verdict": self.verdict,
            "tests": {k: t.to_dict() for k, t in self.tests.items()},
            "explanation": self.explanation,
        }


@dataclass(frozen=True)
class FaultComparison:
    full: dict[str, Any]  # {"label", "onset_step"}
    proxy: dict[str, Any]
    onset_lag_steps: int | None
    onset_lag_progress: float | None
    reproduced: bool
    explanation: str = ""
    #: "reproduced" | "fault_missing" | "extra_fault" | "wrong_fault" | "fault_early" |
    #: "fault_late" | "" (not compared)
    outcome: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "full": self.full,
            "proxy": self.proxy,
            "onset_lag_steps": self.onset_lag_steps,
            "onset_lag_progress": _num(self.onset_lag_progress),
            "reproduced": self.reproduced,
            "explanation": self.explanation,
            "outcome": self.outcome,
        }


PhaseVerdict = Literal["faithful", "partial", "unfaithful", "undecidable"]


@dataclass(frozen=True)
class PhaseFidelity:
    """One phase of a comparison (``whole``, or ``pre_fault`` and ``fault``), scored against the
    seeds' noise on the same phase (:mod:`proxydiag.fidelity.phases`).

    ``fidelity`` is the phase's dynamics score (None when undecidable), ``ci`` the key-weighted
    mean of its metrics' interval bounds, ``learning`` the progress records
    (:mod:`proxydiag.fidelity._progress`), ``reasons`` what decided ``verdict``.
    """

    name: str
    progress: tuple[float, float]
    verdict: PhaseVerdict
    fidelity: float | None
    ci: tuple[float, float] | None
    metrics: dict[str, MetricFidelity]
    learning: dict[str, Any] = field(default_factory=dict)
    reasons: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "progress": [_num(self.progress[0]), _num(self.progress[1])],
            "verdict": self.verdict,
            "fidelity": _num(self.fidelity),
            "ci": [_num(self.ci[0]), _num(self.ci[1])] if self.ci else None,
            "metrics": {k: m.to_dict() for k, m in self.metrics.items()},
            "learning": _clean(self.learning),
            "reasons": list(self.reasons),
        }


@dataclass(frozen=True)
class Comparison:
    """How faithfully a proxy run preserved the full run's dynamics and fault.

    ``to_dict()`` is exactly the CLI's JSON (``proxydiag/schemas/comparison.schema.json``).
    """

    fidelity: float
    verdict: Verdict
    align: str
    metrics: dict[str, MetricFidelity]
    faults: FaultComparison
    full_runs: tuple[str, ...] = ()
    proxy_run: str = ""
    overlap: str = ""  # "overlap" | "progress" and the step range compared
    reasons: tuple[str, ...] = ()
    events: dict[str, Any] = field(default_factory=dict)
    #: the phases judged apart: ``whole`` for a healthy full run, else ``pre_fault`` and
    #: ``fault``; ``fidelity`` is the smaller of their scores (docs/fidelity.md)
    phases: tuple[PhaseFidelity, ...] = ()

    def phase(self, name: str) -> PhaseFidelity | None:
        """The phase called ``name`` (None when the comparison has no such phase)."""
        return next((p for p in self.phases if p.name == name), None)

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "fidelity": _num(self.fidelity),
            "verdict": self.verdict,
            "align": self.align,
            "metrics": {k: m.to_dict() for k, m in self.metrics.items()},
            "faults": self.faults.to_dict(),
            "full_runs": list(self.full_runs),
            "proxy_run": self.proxy_run,
            "overlap": self.overlap,
            "reasons": list(self.reasons),
            "events": self.events,
            **({"phases": [p.to_dict() for p in self.phases]} if self.phases else {}),
        }

    def _repr_html_(self) -> str:
        return display.html(self)
