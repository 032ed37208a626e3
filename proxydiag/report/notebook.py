"""Rich HTML for Jupyter: ``Diagnosis._repr_html_`` and ``Comparison._repr_html_``.

Fragments only (no plotly.js, no page shell); styles are scoped to ``.proxydiag``.
For figures, see :mod:`proxydiag.report.plot`.
"""

from __future__ import annotations

from functools import cache

from proxydiag import display
from proxydiag.diagnose.result import Diagnosis
from proxydiag.fidelity.result import Comparison
from proxydiag.report._fragments import comparison_block, evidence_block, label_line, verdict_line
from proxydiag.report._page import template_text


@cache
def _style() -> str:
    """The report's CSS, scoped so it does not restyle the notebook around it."""
    rules = []
    for line in template_text("style.css").splitlines():
        selector, brace, rest = line.partition("{")
        if selector.strip() == ":root":  # the colour variables, on the fragment itself
            rules.append(f".proxydiag {{{rest}")
            continue
        if not brace or selector.strip().startswith(("*", "body", "main", "header")):
            continue
        scoped = ", ".join(f".proxydiag {s.strip()}" for s in selector.split(","))
        rules.append(f"{scoped} {{{rest}")
    return "<style>" + "\n".join(rules) + "</style>"


def diagnosis_html(d: Diagnosis) -> str:
    """A diagnosis as an HTML fragment: label sentence, evidence, hints.

    >>> from proxydiag.diagnose.result import Diagnosis
    >>> html = diagnosis_html(Diagnosis("s", "<img src=x>", "healthy", None, 0.9, None))
    >>> "<img" in html, "&lt;img src=x&gt;" in html
    (False, True)
    """
    return (
        f'<div class="proxydiag">{_style()}{label_line(d.run, d)}{evidence_block(d.run, d)}</div>'
    )


def comparison_html(c: Comparison) -> str:
    """A comparison as an HTML fragment: verdict sentence, fault, fidelity table."""
    return f'<div class="proxydiag">{_style()}{verdict_line(c)}{comparison_block(c)}</div>'


display.register_html(Diagnosis, diagnosis_html)
display.register_html(Comparison, comparison_html)
