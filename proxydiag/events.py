"""`Event`: something that happened in a run, found by a reader or a detector."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal

Severity = Literal["info", "warning", "critical"]


@dataclass(frozen=True)
class Event:
    """One event on a run's step axis.

    Parameters
    ----------
    kind
        What happened: ``restart``, ``crc_error``, ``nonfinite``, ``overflow``,
        ``scale_collapse``, ``spike``, ``divergence``, ``mismatch_step``, ``mismatch_climb``, ...
    metric
        The canonical metric the evidence comes from (None for run-level events).
    onset_step, end_step
        Where it began and ended (``end_step`` None when it lasts to the end or is a point).
    severity
        ``info`` (benign or context), ``warning``, ``critical`` (decides a label).
    confidence
        In [0, 1].
    evidence
        Human-readable: names the metric and the values that triggered it.

    >>> Event(
    ...     "spike", "grad_norm", 120, 125, "warning", 0.9, "grad_norm 0.8 -> 45.0"
    ... ).to_dict()["kind"]
    'spike'
    """

    kind: str
    metric: str | None
    onset_step: int | None
    end_step: int | None
    severity: Severity
    confidence: float
    evidence: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
