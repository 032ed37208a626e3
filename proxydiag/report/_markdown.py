"""The Markdown report: fits a PR comment or a chat message.

Verdict and labels (one line each), onset, the top evidence, the fidelity table, and the first
hints. User strings are escaped for Markdown and HTML (:func:`~proxydiag.report._escape.md`).
"""

from __future__ import annotations

from proxydiag.report import _phases
from proxydiag.report._escape import md
from proxydiag.report._fragments import top_events
from proxydiag.report._text import ci_text, label_sentence, num, step_text, verdict_sentence
from proxydiag.report.content import ReportContent

TOP_EVIDENCE = 3
TOP_HINTS = 2


def _fidelity_lines(content: ReportContent) -> list[str]:
    c = content.comparison
    if c is None or not c.metrics:
        return []
    lines = ["", "| metric | score | 95% CI | seed-to-seed | verdict |", "|---|---:|---|---:|---|"]
    lines += [
        f"| {md(name)} | {num(m.score)} | {ci_text(m.ci)} | {num(m.seed_baseline)} | {m.verdict} |"
        for name, m in c.metrics.items()
    ]
    return lines + _phases.markdown_lines(c)


def report_markdown(content: ReportContent) -> str:
    """The report as GitHub-flavoured Markdown."""
    lines = ["### proxydiag report", ""]
    c = content.comparison
    if c is not None:
        proxy = content.proxy.name if content.proxy else None
        sentence = verdict_sentence(c, proxy=proxy, full=content.full_names())
        lines += [f"**Verdict:** {md(sentence)}", ""]
    named = content.named_diagnoses()
    for name, d in named:
        lines += [f"**Label:** {md(label_sentence(d, name=name))}", ""]
        if d.onset_step is not None and not d.healthy:
            pct = d.progress_onset
            where = f" ({pct:.0%} of the run)" if pct is not None else ""
            lines.append(f"- onset: step {step_text(d.onset_step)}{where}")
        for e in top_events(d, limit=TOP_EVIDENCE):
            lines.append(
                f"- {e.severity}: {md(e.kind)} in {md(e.metric or 'run')} at step "
                f"{step_text(e.onset_step)} — {md(e.evidence)}"
            )
        for hint in d.hints[:TOP_HINTS]:
            lines.append(f"- check next: {md(hint)}")
        lines.append("")
    if not named and c is None:
        lines.append("No diagnosis available.")
    if c is not None:
        f = c.faults
        lines.append(
            f"**Fault:** full {md(f.full.get('label'))}, proxy {md(f.proxy.get('label'))}"
            f" — {'reproduced' if f.reproduced else 'not reproduced'}"
            + (f", onset lag {f.onset_lag_steps} steps" if f.onset_lag_steps is not None else "")
        )
    lines += _fidelity_lines(content)
    lines += ["", f"<sub>proxydiag · aligned by {md(content.align)}</sub>"]
    return "\n".join(lines) + "\n"
