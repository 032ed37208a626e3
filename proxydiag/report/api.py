"""``report()``: diagnose and compare what was not given, then render HTML, Markdown or JSON."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence

from proxydiag.diagnose.result import Diagnosis
from proxydiag.errors import AnalysisError
from proxydiag.fidelity.result import Comparison
from proxydiag.pipeline import Settings
from proxydiag.report._axis import check_align
from proxydiag.report.content import ReportContent, match_diagnoses, report_runs
from proxydiag.run import Run

FORMATS = ("html", "markdown", "json")


def analyses() -> tuple[Callable[..., Diagnosis], Callable[..., Comparison]]:
    """The analyses a report runs for what it is not given: ``(diagnose, compare)`` (imported
    on use; tests hand in fakes here)."""
    from proxydiag.diagnose.api import diagnose
    from proxydiag.fidelity.api import compare

    return diagnose, compare


def _runs_list(full: Run | Sequence[Run] | None) -> list[Run]:
    if full is None:
        return []
    return [full] if isinstance(full, Run) else list(full)


def resolve(
    *,
    runs: Sequence[Run] | None = None,
    full: Run | Sequence[Run] | None = None,
    proxy: Run | None = None,
    diagnoses: Sequence[Diagnosis] | Mapping[str, Diagnosis] | None = None,
    comparison: Comparison | None = None,
    align: str = "step",
    settings: Settings | None = None,
) -> ReportContent:
    """Everything a report shows, computing diagnoses and the comparison when not given (with
    ``settings``: the defaults for None)."""
    settings = settings or Settings()
    check_align(align)
    fulls, others = _runs_list(full), list(runs or [])
    if bool(fulls) != (proxy is not None):
        raise AnalysisError("a comparison report needs both full= and proxy= runs")
    every = report_runs(fulls, proxy, others)
    found = match_diagnoses(every, diagnoses)
    notes: list[str] = []
    diagnose, compare = analyses()
    for run in every:
        if run.id not in found:
            found[run.id] = diagnose(run, config=settings.diagnose)
    if comparison is None and proxy is not None:
        comparison = compare(
            fulls,
            proxy,
            align=align,
            config=settings.compare,
            full_diagnoses=[found[r.id] for r in fulls],
            proxy_diagnosis=found.get(proxy.id),
        )
    return ReportContent(
        full=tuple(fulls),
        proxy=proxy,
        runs=tuple(others),
        diagnoses=found,
        comparison=comparison,
        align=align,
        notes=tuple(notes),
    )


def render(content: ReportContent, *, fmt: str = "html") -> str:
    """The report document in ``fmt`` (html, markdown or json)."""
    if fmt == "html":
        from proxydiag.report._html import report_html

        return report_html(content)
    if fmt == "markdown":
        from proxydiag.report._markdown import report_markdown

        return report_markdown(content)
    if fmt == "json":
        return json.dumps(content.to_dict(), indent=2, allow_nan=False) + "\n"
    raise AnalysisError(f"format {fmt!r} is not one of {', '.join(FORMATS)}")


def report(
    *,
    runs: Sequence[Run] | None = None,
    full: Run | Sequence[Run] | None = None,
    proxy: Run | None = None,
    diagnoses: Sequence[Diagnosis] | Mapping[str, Diagnosis] | None = None,
    comparison: Comparison | None = None,
    fmt: str = "html",
    align: str = "step",
) -> str:
    """A post-run report as text: a self-contained HTML page, Markdown, or JSON.

    Parameters
    ----------
    runs
        Runs to diagnose and show (a diagnosis report).
    full, proxy
        A full run (or its seeds, reference first) and a proxy (a fidelity report).
    diagnoses, comparison
        Results already computed (matched to runs by run id or name); what is missing is
        computed with :func:`proxydiag.diagnose` / :func:`proxydiag.compare`.
    fmt
        ``html`` (plotly.js embedded once), ``markdown`` (a PR comment) or ``json``
        (``{"diagnoses": [Diagnosis.to_dict()...], "comparison": Comparison.to_dict()}``).
    align
        The x axis of the metric panels (and of the comparison when computed here):
        ``step``, ``tokens``, ``samples`` or ``progress``.
    """
    if fmt not in FORMATS:
        raise AnalysisError(f"format {fmt!r} is not one of {', '.join(FORMATS)}")
    content = resolve(
        runs=runs, full=full, proxy=proxy, diagnoses=diagnoses, comparison=comparison, align=align
    )
    return render(content, fmt=fmt)
