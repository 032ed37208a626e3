"""A :class:`~proxydiag.diagnose.result.Diagnosis` as readable text or as Markdown for a PR
comment (JSON is ``Diagnosis.to_dict()``)."""

from __future__ import annotations

from proxydiag.diagnose.result import Diagnosis
from proxydiag.events import Event
from proxydiag.report._escape import md

#: context events (severity info) shown before "... and N more"
MAX_INFO = 6

_WHY_MISSING = {
    "mismatch_*": "no rollout-vs-learner mismatch metric: precision_fault undecidable",
    "grad_norm": "no grad norm: gradient_overflow / loss_divergence judged on fewer signals",
    "loss_scale": "no loss scale or skip counter: fp16 overflows only visible as non-finite values",
    "loss": "no loss: loss_divergence judged on fewer signals",
}


def _shown(d: Diagnosis) -> tuple[list[Event], int]:
    important = [e for e in d.events if e.severity != "info"]
    info = [e for e in d.events if e.severity == "info"]
    return important + info[:MAX_INFO], max(len(info) - MAX_INFO, 0)


def text(d: Diagnosis) -> str:
    """Plain text: label, onset, confidence, the evidence chain, hints and what is missing.

    >>> from proxydiag.diagnose.result import Diagnosis
    >>> print(text(Diagnosis("a.log", "a-1", "healthy", None, 0.9, None)).splitlines()[1])
      label: healthy   onset: -   confidence: 0.90
    """
    onset = f"step {d.onset_step}" if d.onset_step is not None else "-"
    lines = [
        f"{d.run}  ({d.source})",
        f"  label: {d.label}   onset: {onset}   confidence: {d.confidence:.2f}",
    ]
    if d.summary:
        lines.append(f"  {d.summary}")
    events, more = _shown(d)
    if events:
        lines.append("  evidence (root cause first, then by onset):")
        for i, e in enumerate(events, 1):
            at = f"@{e.onset_step}" if e.onset_step is not None else ""
            lines.append(f"    {i}. [{e.severity}] {e.kind} {e.metric or ''}{at}: {e.evidence}")
        if more:
            lines.append(f"    ... and {more} more context events")
    if d.hints:
        lines.append("  what to check next:")
        lines.extend(f"    - {h}" for h in d.hints)
    if d.missing:
        lines.append("  missing: " + "; ".join(_WHY_MISSING.get(m, m) for m in d.missing))
    return "\n".join(lines)


def markdown(d: Diagnosis) -> str:
    """Markdown that fits a PR comment or a chat message.

    >>> from proxydiag.diagnose.result import Diagnosis
    >>> markdown(Diagnosis("a.log", "<b>x</b>", "healthy", None, 0.9, None)).splitlines()[0]
    '### &lt;b&gt;x&lt;/b&gt;: **healthy**'
    """
    onset = f"step {d.onset_step}" if d.onset_step is not None else "—"
    lines = [
        f"### {md(d.run)}: **{d.label}**",
        "",
        f"onset {onset} · confidence {d.confidence:.2f} · source `{md(d.source)}`",
    ]
    if d.summary:
        lines += ["", md(d.summary)]
    events, more = _shown(d)
    if events:
        lines += [
            "",
            "| # | severity | event | metric | onset | evidence |",
            "|---|---|---|---|---:|---|",
        ]
        for i, e in enumerate(events, 1):
            lines.append(
                f"| {i} | {e.severity} | {e.kind} | {md(e.metric or '')} | "
                f"{e.onset_step if e.onset_step is not None else ''} | {md(e.evidence)} |"
            )
        if more:
            lines.append(f"\n… and {more} more context events")
    if d.hints:
        lines += ["", "**What to check next**", ""] + [f"- {md(h)}" for h in d.hints]
    if d.missing:
        lines += ["", "**Missing:** " + "; ".join(md(_WHY_MISSING.get(m, m)) for m in d.missing)]
    return "\n".join(lines)
