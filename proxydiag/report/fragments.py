"""Escaped HTML fragments shared by the report, the notebook reprs and the dashboard.

Every user string goes through :func:`~proxydiag.report.escape.esc`; nothing here takes raw
HTML from a run.
"""

from __future__ import annotations

from collections.abc import Sequence

from proxydiag.diagnose.result import Diagnosis
from proxydiag.events import Event
from proxydiag.fidelity.result import Comparison, MetricFidelity
from proxydiag.report.escape import esc
from proxydiag.report.text import (
    ci_text,
    fault_sentence,
    label_sentence,
    num,
    step_text,
    verdict_sentence,
)

SEVERITY_RANK = {"critical": 0, "warning": 1, "info": 2}
MAX_EVIDENCE = 12


def badge(word: str) -> str:
    """A coloured pill for a label or verdict (class ``b-<word>``)."""
    return f'<span class="badge b-{esc(word)}">{esc(word)}</span>'


def top_events(d: Diagnosis, *, limit: int = MAX_EVIDENCE) -> list[Event]:
    """The evidence a person reads first: most severe, then most confident, then earliest."""
    ranked = sorted(
        d.events,
        key=lambda e: (SEVERITY_RANK.get(e.severity, 3), -e.confidence,
                       e.onset_step if e.onset_step is not None else 0),
    )
    return ranked[:limit]


def label_line(name: str, d: Diagnosis) -> str:
    return f'<p class="headline">{badge(d.label)} {esc(label_sentence(d, name=name))}</p>'


def verdict_line(c: Comparison, *, proxy: str | None = None, full: str | None = None) -> str:
    return (f'<p class="headline">{badge(c.verdict)} '
            f"{esc(verdict_sentence(c, proxy=proxy, full=full))}</p>")


def evidence_block(name: str, d: Diagnosis) -> str:
    """Evidence chain, missing metrics and "what to check next" for one run."""
    rows = "".join(
        f"<tr><td>{badge(e.severity)}</td><td>{esc(e.kind)}</td><td>{esc(e.metric or '—')}</td>"
        f"<td class=num>{step_text(e.onset_step)}</td><td class=num>{step_text(e.end_step)}</td>"
        f"<td class=num>{e.confidence:.2f}</td><td>{esc(e.evidence)}</td></tr>"
        for e in top_events(d)
    )
    more = len(d.events) - min(len(d.events), MAX_EVIDENCE)
    parts = [f"<h3>{esc(name)} {badge(d.label)}</h3>"]
    if d.summary:
        parts.append(f"<p>{esc(d.summary)}</p>")
    if rows:
        parts.append(
            "<table class=grid><thead><tr><th>severity</th><th>event</th><th>metric</th>"
            "<th>onset</th><th>end</th><th>conf.</th><th>evidence</th></tr></thead>"
            f"<tbody>{rows}</tbody></table>"
        )
        if more > 0:
            parts.append(f"<p class=muted>… and {more} more events (see the JSON output).</p>")
    else:
        parts.append("<p class=muted>No events.</p>")
    if d.missing:
        parts.append("<p><b>Missing metrics</b> (would have decided a class): "
                     f"{esc(', '.join(d.missing))}</p>")
    if d.hints:
        items = "".join(f"<li>{esc(h)}</li>" for h in d.hints)
        parts.append(f"<p><b>What to check next</b></p><ul class=hints>{items}</ul>")
    return "\n".join(parts)


def _tests_detail(m: MetricFidelity) -> str:
    rows = "".join(
        f"<tr><td>{esc(name)}</td><td class=num>{esc(num(t.value))}</td>"
        f"<td class=num>{esc(num(t.score))}</td><td class=num>{esc(ci_text(t.ci))}</td>"
        f"<td class=num>{esc(num(t.seed_baseline))}</td><td>{esc(t.explanation)}</td></tr>"
        for name, t in m.tests.items()
    )
    if not rows:
        return ""
    return (
        "<details><summary>tests</summary><table class=grid><thead><tr><th>test</th>"
        "<th>statistic</th><th>score</th><th>CI</th><th>seed-to-seed</th><th>meaning</th>"
        f"</tr></thead><tbody>{rows}</tbody></table></details>"
    )


def fidelity_table(c: Comparison) -> str:
    """Per-metric scores with confidence intervals, seed baselines and verdicts."""
    rows = "".join(
        f"<tr><td>{esc(name)}</td><td class=num>{esc(num(m.score))}</td>"
        f"<td class=num>{esc(ci_text(m.ci))}</td><td class=num>{esc(num(m.seed_baseline))}</td>"
        f"<td>{badge(m.verdict)}</td><td>{esc(m.explanation)}{_tests_detail(m)}</td></tr>"
        for name, m in c.metrics.items()
    )
    head = (
        "<table class=grid><thead><tr><th>metric</th><th>score</th><th>95% CI</th>"
        "<th>seed-to-seed</th><th>verdict</th><th>why</th></tr></thead>"
    )
    return f"{head}<tbody>{rows}</tbody></table>" if rows else "<p class=muted>No metrics.</p>"


def comparison_block(c: Comparison) -> str:
    """Fault reproduction, reasons and the table."""
    reasons = "".join(f"<li>{esc(r)}</li>" for r in c.reasons)
    overlap = f" Compared on: {esc(c.overlap)}." if c.overlap else ""
    return (
        f"<p><b>Fault:</b> {esc(fault_sentence(c))}</p>"
        f"<p class=muted>Aligned by {esc(c.align)}.{overlap}</p>"
        + (f"<ul class=reasons>{reasons}</ul>" if reasons else "")
        + fidelity_table(c)
    )


def definition_list(pairs: Sequence[tuple[str, str]]) -> str:
    """``<dl>`` of escaped key/value pairs."""
    return "<dl>" + "".join(f"<dt>{esc(k)}</dt><dd>{esc(v)}</dd>" for k, v in pairs) + "</dl>"
