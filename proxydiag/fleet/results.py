"""Results back from their JSON: a Diagnosis kept in the store, reused by a fleet re-run.

``diagnosis_from_dict(d.to_dict()).to_dict() == d.to_dict()`` for every Diagnosis (the JSON
contract is the whole of what a fleet re-run prints).

>>> from proxydiag.diagnose.result import Diagnosis, RootCause
>>> d = Diagnosis(source="s", run="r", label="loss_divergence", onset_step=7, confidence=0.5,
...               root_cause=RootCause("divergence", "loss", 7), hints=("check lr",))
>>> diagnosis_from_dict(d.to_dict()) == d
True
"""

from __future__ import annotations

from typing import Any

from proxydiag.diagnose.result import Diagnosis, RootCause
from proxydiag.events import Event


def diagnosis_from_dict(data: dict[str, Any]) -> Diagnosis:
    """The :class:`Diagnosis` whose ``to_dict()`` is ``data``."""
    cause = data.get("root_cause")
    return Diagnosis(
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
