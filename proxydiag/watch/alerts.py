"""`Alert`: what the watcher raises while a run is still going (JSON:
``watch_alert.schema.json``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from proxydiag.events import Event

#: an alert at least this confident is ``critical`` (the taxonomy's confirmed failures);
#: ``warning`` below (``proxydiag watch --notify-min`` filters on it)
CRITICAL_CONFIDENCE = 0.7


@dataclass(frozen=True)
class Rollback:
    """Where to go back to: the last checkpoint before the onset minus a margin.

    ``skip_steps`` are the steps (batches) between the checkpoint and the onset, which the
    restarted run should skip (PaLM's practice: restart ~100 steps before the spike and skip
    the batches in between).
    """

    checkpoint_step: int
    checkpoint: str | None
    skip_from_step: int
    skip_to_step: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "checkpoint_step": self.checkpoint_step,
            "checkpoint": self.checkpoint,
            "skip_from_step": self.skip_from_step,
            "skip_to_step": self.skip_to_step,
        }


@dataclass(frozen=True)
class Alert:
    """A failure class the watcher has seen in a run, with the vocabulary of a ``Diagnosis``.

    ``raised_at_step`` is the largest step fed when it was raised (causal: the alert used only
    points at or before it). A class is alerted once; ``revision`` marks a later alert of the
    same class whose onset moved.

    >>> a = Alert("r1", "run", "loss_divergence", 210, 240, 0.8, summary="loss_divergence ...")
    >>> a.to_dict()["class"], a.delay_steps
    ('loss_divergence', 30)
    """

    run: str
    name: str
    label: str
    onset_step: int | None
    raised_at_step: int
    confidence: float
    summary: str = ""
    evidence: tuple[Event, ...] = ()
    hints: tuple[str, ...] = ()
    revision: bool = False
    trigger: str = ""
    rollback: Rollback | None = field(default=None)
    #: steps by which MoE routing (``router_*`` events) changed before the onset
    router_lead_steps: int | None = None

    @property
    def tier(self) -> str:
        """``critical`` for a confirmed failure (confidence at least
        :data:`CRITICAL_CONFIDENCE`), ``warning`` for an early or uncertain one."""
        return "critical" if self.confidence >= CRITICAL_CONFIDENCE else "warning"

    @property
    def recommendation(self) -> str:
        """What to check first: the first hint, on one line."""
        first = next((h for h in self.hints if h.strip()), "")
        return " ".join(first.split())

    @property
    def delay_steps(self) -> int | None:
        """Steps between the onset and the moment the alert was raised."""
        return None if self.onset_step is None else self.raised_at_step - self.onset_step

    def to_dict(self) -> dict[str, Any]:
        return {
            "final": False,
            "run": self.run,
            "name": self.name,
            "class": self.label,
            "onset_step": self.onset_step,
            "raised_at_step": self.raised_at_step,
            "confidence": round(float(self.confidence), 4),
            "revision": self.revision,
            "summary": self.summary,
            "trigger": self.trigger,
            "evidence": [e.to_dict() for e in self.evidence],
            "hints": list(self.hints),
            "rollback": self.rollback.to_dict() if self.rollback else None,
            "router_lead_steps": self.router_lead_steps,
            "tier": self.tier,
            "recommendation": self.recommendation,
        }


def alert_from_dict(data: Mapping[str, Any]) -> Alert:
    """The :class:`Alert` of its ``to_dict()`` (for resumed watches).

    >>> a = Alert("r", "n", "precision_fault", 10, 20, 0.9)
    >>> alert_from_dict(a.to_dict()) == a
    True
    """
    rb = data.get("rollback")
    return Alert(
        str(data["run"]),
        str(data["name"]),
        str(data["class"]),
        data["onset_step"],
        int(data["raised_at_step"]),
        float(data["confidence"]),
        str(data.get("summary", "")),
        tuple(Event(**e) for e in data.get("evidence", [])),
        tuple(data.get("hints", [])),
        bool(data.get("revision", False)),
        str(data.get("trigger", "")),
        Rollback(**rb) if rb else None,
        data.get("router_lead_steps"),
    )
