"""Rolled-back segments are evidence: a failure the run was rolled back from is diagnosed too.

When a run restarts from an earlier step (a rollback after a failure), the reader keeps the
final timeline and hands each superseded one over as ``Run.superseded`` (the run as it stood
before the rollback). Each is diagnosed like a run; a failure found there becomes a
``rollback`` event ("loss_divergence at 7010, rolled back to 6900; the final timeline
recovered") and the run's label names the first failure in its whole history, superseded
segments included (BigScience's chronicles: diverged, rolled back, diverged again).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from proxydiag.diagnose.result import Diagnosis
from proxydiag.events import Event
from proxydiag.run import Run


def combine(main: Diagnosis, run: Run, diagnose_one: Callable[[Run], Diagnosis]) -> Diagnosis:
    """``main`` (the final timeline's diagnosis) with the failures of the superseded ones."""
    found = []
    for sub in run.superseded:  # in the order the rollbacks happened
        d = diagnose_one(sub)
        # a failure before the rollback step lies in rows the final timeline kept: its own
        if (
            d.label != "healthy"
            and d.onset_step is not None
            and (d.onset_step >= int(sub.attrs["rolled_back_to"]))
        ):
            found.append((sub, d))
    if not found:
        return main
    recovered = main.label == "healthy"
    events = tuple(_event(sub, d, main, recovered=recovered) for sub, d in found)
    table = tuple(_row(sub, d, recovered=recovered) for sub, d in found)
    first_sub, first = found[0]
    # rows of the final timeline below a rollback step were written before the segment it
    # superseded: a failure there came first in time
    if (
        not recovered
        and main.onset_step is not None
        and (main.onset_step < int(first_sub.attrs["rolled_back_to"]))
    ):
        return replace(main, events=(*main.events[:1], *events, *main.events[1:]), rollbacks=table)
    back = first_sub.attrs["rolled_back_to"]
    return replace(
        main,
        label=first.label,
        onset_step=first.onset_step,
        confidence=first.confidence,
        root_cause=first.root_cause,
        events=(*events, *main.events),
        hints=first.hints,
        rollbacks=table,
        summary=(
            f"{first.label} from step {first.onset_step} (confidence {first.confidence:.2f})"
            f" in a segment rolled back to step {back}; the final timeline "
            + ("recovered." if recovered else f"failed again: {main.summary}")
        ),
    )


def _event(sub: Run, d: Diagnosis, main: Diagnosis, *, recovered: bool) -> Event:
    root = d.root_cause
    what = f"{root.kind} in {root.metric}" if root is not None else d.label
    after = (
        "the final timeline recovered (healthy)"
        if recovered
        else f"the final timeline failed too ({main.label} from step {main.onset_step})"
    )
    return Event(
        "rollback",
        root.metric if root else None,
        d.onset_step,
        int(sub.attrs["superseded_until"]),
        "critical",
        d.confidence,
        f"{d.label} at step {d.onset_step} ({what}), rolled back to step "
        f"{sub.attrs['rolled_back_to']} (the superseded segment ran to step "
        f"{sub.attrs['superseded_until']}); {after}",
    )


def _row(sub: Run, d: Diagnosis, *, recovered: bool) -> dict[str, Any]:
    return {
        "rolled_back_to": int(sub.attrs["rolled_back_to"]),
        "superseded_until": int(sub.attrs["superseded_until"]),
        "label": d.label,
        "onset_step": d.onset_step,
        "final_recovered": recovered,
    }
