"""Escaped HTML fragments shared by the report, the notebook reprs and the dashboard.

Every user string goes through :func:`~proxydiag.report._escape.esc`; nothing here takes raw
HTML from a run.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence

from proxydiag.diagnose.result import Diagnosis
from proxydiag.events import Event
from proxydiag.fidelity.result import Comparison, MetricFidelity
from proxydiag.report import _phases
from proxydiag.report._escape import esc
from proxydiag.report._text import (
    ci_text,
    fault_sentence,
    label_sentence,
    num,
    step_text,
    verdict_sentence,
)

SEVERITY_RANK = {"critical": 0, "warning": 1, "info": 2}
MAX_EVIDENCE = 12
EVIDENCE_HEAD = ("severity", "event", "metric", "onset", "end", "conf.", "evidence")
TESTS_HEAD = ("test", "statistic", "score", "CI", "seed-to-seed", "meaning")
FIDELITY_HEAD = ("metric", "score", "95% CI", "seed-to-seed", "verdict", "why")


def badge(word: str) -> str:
    """A coloured pill for a label or verdict (class ``b-<word>``)."""
    return f'<span class="badge b-{esc(word)}">{esc(word)}</span>'


def grid_table(
    head: Sequence[str], rows: Iterable[Sequence[str]], *, numeric: Collection[str] = ()
) -> str:
    """A ``<table class=grid>``: ``head`` is plain text (escaped here), each row's cells are
    HTML the caller escaped; columns named in ``numeric`` are right-aligned numbers.

    >>> html = grid_table(["run", "points"], [[esc("<b>"), "3"]], numeric={"points"})
    >>> print(html.replace("<tbody>", "\\n<tbody>"))
    <table class=grid><thead><tr><th>run</th><th>points</th></tr></thead>
    <tbody><tr><td>&lt;b&gt;</td><td class=num>3</td></tr></tbody></table>
    """
    opens = ["<td class=num>" if h in numeric else "<td>" for h in head]
    body = "".join(
        "<tr>" + "".join(f"{o}{c}</td>" for o, c in zip(opens, row, strict=True)) + "</tr>"
        for row in rows
    )
    titles = "".join(f"<th>{esc(h)}</th>" for h in head)
    return f"<table class=grid><thead><tr>{titles}</tr></thead><tbody>{body}</tbody></table>"


def top_events(d: Diagnosis, *, limit: int = MAX_EVIDENCE) -> list[Event]:
    """The evidence a person reads first: most severe, then most confident, then earliest."""
    ranked = sorted(
        d.events,
        key=lambda e: (
            SEVERITY_RANK.get(e.severity, 3),
            -e.confidence,
            e.onset_step if e.onset_step is not None else 0,
        ),
    )
    return ranked[:limit]


def label_line(name: str, d: Diagnosis) -> str:
    return f'<p class="headline">{badge(d.label)} {esc(label_sentence(d, name=name))}</p>'


def verdict_line(c: Comparison, *, proxy: str | None = None, full: str | None = None) -> str:
    return (
        f'<p class="headline">{badge(c.verdict)} '
        f"{esc(verdict_sentence(c, proxy=proxy, full=full))}</p>"
    )


def evidence_block(name: str, d: Diagnosis) -> str:
    """Evidence chain, missing metrics and "what to check next" for one run."""
    more = len(d.events) - min(len(d.events), MAX_EVIDENCE)
    parts = [f"<h3>{esc(name)} {badge(d.label)}</h3>"]
    if d.summary:
        parts.append(f"<p>{esc(d.summary)}</p>")
    if d.events:
        rows = [
            [
                badge(e.severity),
                esc(e.kind),
                esc(e.metric or "—"),
                step_text(e.onset_step),
                step_text(e.end_step),
                f"{e.confidence:.2f}",
                esc(e.evidence),
            ]
            for e in top_events(d)
        ]
        parts.append(grid_table(EVIDENCE_HEAD, rows, numeric={"onset", "end", "conf."}))
        if more > 0:
            parts.append(f"<p class=muted>… and {more} more events (see the JSON output).</p>")
    else:
        parts.append("<p class=muted>No events.</p>")
    if d.missing:
        parts.append(
            "<p><b>Missing metrics</b> (would have decided a class): "
            f"{esc(', '.join(d.missing))}</p>"
        )
    if d.hints:
        items = "".join(f"<li>{esc(h)}</li>" for h in d.hints)
        parts.append(f"<p><b>What to check next</b></p><ul class=hints>{items}</ul>")
    return "\n".join(parts)


def _tests_detail(m: MetricFidelity) -> str:
    if not m.tests:
        return ""
    rows = [
        [
            esc(name),
            esc(num(t.value)),
            esc(num(t.score)),
            esc(ci_text(t.ci)),
            esc(num(t.seed_baseline)),
            esc(t.explanation),
        ]
        for name, t in m.tests.items()
    ]
    table = grid_table(TESTS_HEAD, rows, numeric=TESTS_HEAD[1:5])
    return f"<details><summary>tests</summary>{table}</details>"


def fidelity_table(c: Comparison) -> str:
    """Per-metric scores with confidence intervals, seed baselines and verdicts."""
    if not c.metrics:
        return "<p class=muted>No metrics.</p>"
    rows = [
        [
            esc(name),
            esc(num(m.score)),
            esc(ci_text(m.ci)),
            esc(num(m.seed_baseline)),
            badge(m.verdict),
            f"{esc(m.explanation)}{_tests_detail(m)}",
        ]
        for name, m in c.metrics.items()
    ]
    return grid_table(FIDELITY_HEAD, rows, numeric=FIDELITY_HEAD[1:4])


def phase_table(c: Comparison) -> str:
    """The phases judged apart (pre-fault learning, fault response): one row each."""
    if not c.phases:
        return ""
    rows = [
        [badge(cell) if k == 2 else esc(cell) for k, cell in enumerate(_phases.phase_row(p))]
        for p in c.phases
    ]
    return "<p><b>Phases</b></p>" + grid_table(_phases.HEAD, rows, numeric={"fidelity [CI]"})


def comparison_block(c: Comparison) -> str:
    """Fault reproduction, reasons and the table."""
    reasons = "".join(f"<li>{esc(r)}</li>" for r in c.reasons)
    overlap = f" Compared on: {esc(c.overlap)}." if c.overlap else ""
    return (
        f"<p><b>Fault:</b> {esc(fault_sentence(c))}</p>"
        f"<p class=muted>Aligned by {esc(c.align)}.{overlap}</p>"
        + (f"<ul class=reasons>{reasons}</ul>" if reasons else "")
        + phase_table(c)
        + fidelity_table(c)
    )


def definition_list(pairs: Sequence[tuple[str, str]]) -> str:
    """``<dl>`` of escaped key/value pairs."""
    return "<dl>" + "".join(f"<dt>{esc(k)}</dt><dd>{esc(v)}</dd>" for k, v in pairs) + "</dl>"
