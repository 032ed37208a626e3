"""`Diagnosis`: the run-level verdict of the failure taxonomy
(docs/architecture.md#json-contracts)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from proxydiag import display
from proxydiag.events import Event

#: version of the JSON contract (proxydiag/schemas/); optional keys added bump the minor
#: (1.2: "rollbacks")
SCHEMA_VERSION = "1.2"

Label = Literal["healthy", "gradient_overflow", "loss_divergence", "precision_fault"]
LABELS: tuple[str, ...] = ("healthy", "gradient_overflow", "loss_divergence", "precision_fault")


@dataclass(frozen=True)
class RootCause:
    kind: str
    metric: str | None
    onset_step: int | None

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "metric": self.metric, "onset_step": self.onset_step}


@dataclass(frozen=True)
class Diagnosis:
    """What went wrong in a run, when it began, the evidence, and what to check next.

    ``to_dict()`` is exactly the CLI's JSON (``proxydiag/schemas/diagnosis.schema.json``).
    """

    source: str
    run: str
    label: str
    onset_step: int | None
    confidence: float
    root_cause: RootCause | None
    events: tuple[Event, ...] = ()
    hints: tuple[str, ...] = ()
    missing: tuple[str, ...] = ()
    metrics: dict[str, str] = field(default_factory=dict)
    #: steps of the run (first, last); not part of the JSON contract's required keys
    first_step: int | None = None
    last_step: int | None = None
    summary: str = ""
    #: failures found in timelines the run was rolled back from (see diagnose.rollbacks)
    rollbacks: tuple[dict[str, Any], ...] = ()
    #: the kind of a precision fault and its evidence (docs/failures.md#the-kind-of-precision-fault)
    precision_kind: dict[str, str] | None = None

    @property
    def healthy(self) -> bool:
        return self.label == "healthy"

    @property
    def progress_onset(self) -> float | None:
        """Onset as a fraction of the run's step range (None when healthy)."""
        if self.onset_step is None or self.first_step is None or self.last_step is None:
            return None
        span = max(self.last_step - self.first_step, 1)
        return (self.onset_step - self.first_step) / span

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Diagnosis:
        """The diagnosis whose :meth:`to_dict` is ``data`` (a result kept in a store, reused).

        >>> d = Diagnosis(source="s", run="r", label="loss_divergence", onset_step=7,
        ...               confidence=0.5, root_cause=RootCause("divergence", "loss", 7),
        ...               hints=("check lr",))
        >>> Diagnosis.from_dict(d.to_dict()) == d
        True
        """
        cause = data.get("root_cause")
        return cls(
            source=data["source"],
            run=data["run"],
            label=data["label"],
            onset_step=data.get("onset_step"),
            confidence=data["confidence"],
            root_cause=RootCause(**cause) if cause else None,
            events=tuple(Event(**e) for e in data.get("events", [])),
            hints=tuple(data.get("hints", [])),
            missing=tuple(data.get("missing", [])),
            metrics=dict(data.get("metrics", {})),
            first_step=data.get("first_step"),
            last_step=data.get("last_step"),
            summary=data.get("summary", ""),
            rollbacks=tuple(dict(r) for r in data.get("rollbacks", [])),
            precision_kind=dict(data["precision_kind"]) if data.get("precision_kind") else None,
        )

    def to_dict(self) -> dict[str, Any]:
        out = self._core_dict()
        if self.rollbacks:  # an optional key: present only when a rollback was diagnosed
            out["rollbacks"] = [dict(r) for r in self.rollbacks]
        if self.precision_kind:  # optional: present only on a precision fault
            out["precision_kind"] = dict(self.precision_kind)
        return out

    def _core_dict(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "source": self.source,
            "run": self.run,
            "label": self.label,
            "onset_step": self.onset_step,
            "confidence": round(float(self.confidence), 4),
            "root_cause": self.root_cause.to_dict() if self.root_cause else None,
            "events": [e.to_dict() for e in self.events],
            "hints": list(self.hints),
            "missing": list(self.missing),
            "metrics": dict(self.metrics),
            "first_step": self.first_step,
            "last_step": self.last_step,
            "summary": self.summary,
        }

    def _repr_html_(self) -> str:
        return display.html(self)
