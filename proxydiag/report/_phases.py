"""The phases of a comparison (pre-fault learning, fault response) as text and Markdown rows
(the HTML table is :func:`proxydiag.report._fragments.phase_table`).

One row per phase: its range in progress, verdict, fidelity with its interval, the learning
progress of reward / loss / entropy, and the first reason. A comparison without phases (one
made before phases existed, read back from JSON) renders nothing.

>>> from proxydiag.fidelity.result import PhaseFidelity
>>> row = phase_row(PhaseFidelity("pre_fault", (0.0, 0.45), "partial", 0.62, (0.5, 0.7), {},
...                               {"reward": {"status": "less", "fraction": 0.3}}, ("why",)))
>>> row[:4]
['pre_fault', '0%–45%', 'partial', '0.62 [0.50, 0.70]']
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from proxydiag.fidelity.result import Comparison, PhaseFidelity
from proxydiag.report._escape import md

HEAD = ["phase", "progress", "verdict", "fidelity [CI]", "learning", "why"]


def phase_row(p: PhaseFidelity) -> list[str]:
    """A phase as plain strings, in the order of :data:`HEAD`."""
    score = "n/a" if p.fidelity is None else f"{p.fidelity:.2f}"
    if p.ci is not None and p.fidelity is not None:
        score += f" [{p.ci[0]:.2f}, {p.ci[1]:.2f}]"
    return [
        p.name,
        f"{p.progress[0]:.0%}–{p.progress[1]:.0%}",
        p.verdict,
        score,
        _learning(p.learning),
        p.reasons[0] if p.reasons else "",
    ]


def text_lines(c: Comparison) -> list[str]:
    """``phases:`` and one indented line per phase (nothing without phases)."""
    if not c.phases:
        return []
    rows = [phase_row(p) for p in c.phases]
    return [
        "phases:",
        *(
            f"  {r[0]} ({r[1]} of progress): {r[2]}, fidelity {r[3]}"
            + (f"; learning {r[4]}" if r[4] else "")
            + f" — {r[5]}"
            for r in rows
        ),
    ]


def markdown_lines(c: Comparison) -> list[str]:
    """A Markdown table of the phases (nothing without phases)."""
    if not c.phases:
        return []
    lines = ["", "| " + " | ".join(HEAD) + " |", "|---|---|---|---:|---|---|"]
    lines += ["| " + " | ".join(md(cell) for cell in phase_row(p)) + " |" for p in c.phases]
    return lines


def _learning(records: Mapping[str, Mapping[str, Any]]) -> str:
    """``reward learns 91%, entropy pace`` (the metrics whose full run changes)."""
    parts = []
    for metric, r in records.items():
        status = r.get("status")
        if status in (None, "flat"):
            continue
        fraction = r.get("fraction")
        parts.append(f"{metric} {status}" + (f" {fraction:.0%}" if fraction is not None else ""))
    return ", ".join(parts)
